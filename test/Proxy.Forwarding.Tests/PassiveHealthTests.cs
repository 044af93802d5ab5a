using Microsoft.Extensions.Time.Testing;
using Microsoft.Extensions.Logging.Abstractions;
using Microsoft.Extensions.Options;
using Proxy.Forwarding.BackendPools;
using Proxy.Forwarding.Configuration;
using Proxy.Forwarding.Forwarder;
using Proxy.Forwarding.Health;
using Proxy.Forwarding.LoadBalancing;
using Proxy.Forwarding.Tests.Infrastructure;

namespace Proxy.Forwarding.Tests;

/// <summary>The passive policies' arithmetic, on virtual time: no sockets, no sleeps.</summary>
public class PassiveHealthTests
{
    private readonly FakeTimeProvider _time = new();

    private (ClusterState Cluster, DestinationState Destination, PassiveHealthChecker Checker) Setup(
        string? policy = null, TimeSpan? reactivation = null, string? rateLimit = null, bool enabled = true)
    {
        var config = new ClusterConfig
        {
            ClusterId = "c",
            Destinations = new Dictionary<string, DestinationConfig> { ["d"] = new() { Address = "http://127.0.0.1:1/" } },
            HealthCheck = new HealthCheckConfig { Passive = new PassiveHealthCheckConfig { Enabled = enabled, Policy = policy, ReactivationPeriod = reactivation } },
            Metadata = rateLimit is null ? null : new Dictionary<string, string> { [TransportFailureRateHealthPolicyOptions.RateLimitMetadataKey] = rateLimit },
        };
        var cluster = BackendPoolFactory.Build(config, new Dictionary<string, ILoadBalancingPolicy> { ["PowerOfTwoChoices"] = new PowerOfTwoChoicesPolicy() }, _time);
        var checker = new PassiveHealthChecker(_time, Options.Create(new TransportFailureRateHealthPolicyOptions()), NullLogger<PassiveHealthChecker>.Instance);
        return (cluster, cluster.Destinations[0], checker);
    }

    private static void Complete(PassiveHealthChecker checker, ClusterState cluster, DestinationState destination, int ok, int failed,
        ForwarderError failure = ForwarderError.Request)
    {
        for (var i = 0; i < ok; i++)
        {
            checker.RequestCompleted(cluster, destination, ForwarderError.None);
        }

        for (var i = 0; i < failed; i++)
        {
            checker.RequestCompleted(cluster, destination, failure);
        }
    }

    [Fact]
    public void TransportFailureRate_BelowMinimalCount_StaysAvailable()
    {
        var (cluster, d, checker) = Setup();

        Complete(checker, cluster, d, ok: 0, failed: 9);

        Assert.Equal(DestinationHealth.Unknown, d.Health);
        Assert.Equal((9, 9), d.PassiveWindow.Counts(_time.GetTimestamp(), TimeSpan.FromSeconds(6).Ticks));
    }

    [Fact]
    public void TransportFailureRate_TenthFailure_Unhealthy()
    {
        var (cluster, d, checker) = Setup();

        Complete(checker, cluster, d, ok: 0, failed: 10);

        Assert.Equal(DestinationHealth.Unhealthy, d.Health);
    }

    [Theory]
    [InlineData(7, 3, DestinationHealth.Unknown)]   // 0.3 is not above the 0.3 limit
    [InlineData(6, 4, DestinationHealth.Unhealthy)] // 0.4 is
    [InlineData(70, 29, DestinationHealth.Unknown)]
    [InlineData(70, 31, DestinationHealth.Unhealthy)]
    public void TransportFailureRate_RateAgainstDefaultLimit(int ok, int failed, DestinationHealth expected)
    {
        var (cluster, d, checker) = Setup();

        Complete(checker, cluster, d, ok, failed);

        Assert.Equal(expected, d.Health);
    }

    [Theory]
    [InlineData("0.5", 5, 5, DestinationHealth.Unknown)]
    [InlineData("0.5", 4, 6, DestinationHealth.Unhealthy)]
    [InlineData("0.1", 8, 2, DestinationHealth.Unhealthy)]
    public void TransportFailureRate_MetadataRateLimit_Overrides(string limit, int ok, int failed, DestinationHealth expected)
    {
        var (cluster, d, checker) = Setup(rateLimit: limit);

        Complete(checker, cluster, d, ok, failed);

        Assert.Equal(expected, d.Health);
    }

    [Fact]
    public void TransportFailureRate_AfterReactivationPeriod_AvailableAgainWithFreshWindow()
    {
        var (cluster, d, checker) = Setup();
        Complete(checker, cluster, d, ok: 0, failed: 10);

        _time.Advance(TimeSpan.FromSeconds(59));
        var during = d.Health;
        _time.Advance(TimeSpan.FromSeconds(1));
        var after = d.Health;
        // One more failure must not trip it again: the failures that tripped it are forgotten.
        Complete(checker, cluster, d, ok: 0, failed: 1);

        Assert.Equal(DestinationHealth.Unhealthy, during);
        Assert.Equal(DestinationHealth.Unknown, after);
        Assert.Equal(DestinationHealth.Unknown, d.Health);
    }

    [Fact]
    public void TransportFailureRate_TrippedAgainAfterReactivation_UnhealthyForAFullPeriodAgain()
    {
        // A period seen over is cleared without the clock being read again on every request; a later trip must still sit
        // the destination out for a whole new period.
        var (cluster, d, checker) = Setup(reactivation: TimeSpan.FromSeconds(5));
        Complete(checker, cluster, d, ok: 0, failed: 10);
        _time.Advance(TimeSpan.FromSeconds(5));
        Assert.Equal(DestinationHealth.Unknown, d.Health);
        Assert.Equal(DestinationHealth.Unknown, d.Health);

        Complete(checker, cluster, d, ok: 0, failed: 10);
        _time.Advance(TimeSpan.FromSeconds(4));
        Assert.Equal(DestinationHealth.Unhealthy, d.Health);
        _time.Advance(TimeSpan.FromSeconds(1));
        Assert.Equal(DestinationHealth.Unknown, d.Health);
    }

    [Fact]
    public void TransportFailureRate_ConfiguredReactivationPeriod_Honoured()
    {
        var (cluster, d, checker) = Setup(reactivation: TimeSpan.FromSeconds(5));
        Complete(checker, cluster, d, ok: 0, failed: 10);

        _time.Advance(TimeSpan.FromSeconds(4));
        Assert.Equal(DestinationHealth.Unhealthy, d.Health);
        _time.Advance(TimeSpan.FromSeconds(1));
        Assert.Equal(DestinationHealth.Unknown, d.Health);
    }

    [Fact]
    public void TransportFailureRate_WindowSlides_OldFailuresForgotten()
    {
        var (cluster, d, checker) = Setup();
        Complete(checker, cluster, d, ok: 0, failed: 9);

        _time.Advance(TimeSpan.FromSeconds(61));
        // Counted together with the old 9 this would be 10 of 19 (> 0.3); alone it is 1 of 10.
        Complete(checker, cluster, d, ok: 9, failed: 1);

        Assert.Equal(DestinationHealth.Unknown, d.Health);
    }

    [Fact]
    public void TransportFailureRate_FailuresSpreadWithinWindow_AllCounted()
    {
        var (cluster, d, checker) = Setup();
        for (var i = 0; i < 10; i++)
        {
            Complete(checker, cluster, d, ok: 0, failed: 1);
            _time.Advance(TimeSpan.FromSeconds(5)); // 10 failures over 45 s: all inside one 60 s window
        }

        Assert.Equal(DestinationHealth.Unhealthy, d.Health);
    }

    [Fact]
    public void TransportFailureRate_ActiveHealthyButPassivelyTripped_Unhealthy()
    {
        var (cluster, d, checker) = Setup();
        d.Health = DestinationHealth.Healthy;

        Complete(checker, cluster, d, ok: 0, failed: 10);

        Assert.Equal(DestinationHealth.Unhealthy, d.Health);
        _time.Advance(TimeSpan.FromSeconds(60));
        Assert.Equal(DestinationHealth.Healthy, d.Health);
    }

    [Theory]
    [InlineData(ForwarderError.Request, true)]
    [InlineData(ForwarderError.RequestTimedOut, true)]
    [InlineData(ForwarderError.RequestBodyDestination, true)]
    [InlineData(ForwarderError.ResponseBodyDestination, true)]
    [InlineData(ForwarderError.None, false)]
    [InlineData(ForwarderError.RequestCanceled, false)]
    [InlineData(ForwarderError.ResponseBodyCanceled, false)]
    [InlineData(ForwarderError.RequestBodyClient, false)]
    [InlineData(ForwarderError.ResponseBodyClient, false)]
    [InlineData(ForwarderError.RequestMalformed, false)]
    [InlineData(ForwarderError.ResponseBodyTimedOut, false)]
    public void TransportFailureRate_WhatCountsAsFailure(ForwarderError error, bool isFailure)
    {
        var (cluster, d, checker) = Setup();

        Complete(checker, cluster, d, ok: 0, failed: 20, failure: error);

        Assert.Equal(isFailure, PassiveHealthChecker.IsTransportFailure(error));
        Assert.Equal(isFailure ? DestinationHealth.Unhealthy : DestinationHealth.Unknown, d.Health);
    }

    [Theory]
    [InlineData(ForwarderError.RequestMalformed, 0)]
    [InlineData(ForwarderError.RequestCanceled, 10)]
    [InlineData(ForwarderError.ResponseBodyTimedOut, 10)]
    public void TransportFailureRate_NonFailures_CountedOnlyWhenSent(ForwarderError error, int expectedTotal)
    {
        var (cluster, d, checker) = Setup();

        Complete(checker, cluster, d, ok: 0, failed: 10, failure: error);

        Assert.Equal((expectedTotal, 0), d.PassiveWindow.Counts(_time.GetTimestamp(), TimeSpan.FromSeconds(6).Ticks));
    }

    [Fact]
    public void TransportFailureRate_NonFailuresDiluteTheRate()
    {
        var (cluster, d, checker) = Setup();

        // 3 failures of 10: at the limit, not above it. Client cancellations are healthy traffic.
        Complete(checker, cluster, d, ok: 0, failed: 7, failure: ForwarderError.ResponseBodyCanceled);
        Complete(checker, cluster, d, ok: 0, failed: 3);

        Assert.Equal(DestinationHealth.Unknown, d.Health);
    }

    [Fact]
    public void Passive_Disabled_NothingRecorded()
    {
        var (cluster, d, checker) = Setup(enabled: false);

        Complete(checker, cluster, d, ok: 0, failed: 20);

        Assert.Equal(DestinationHealth.Unknown, d.Health);
        Assert.Equal((0, 0), d.PassiveWindow.Counts(_time.GetTimestamp(), TimeSpan.FromSeconds(6).Ticks));
    }

    [Fact]
    public void FirstFailure_OneFailure_UnhealthyForReactivationPeriod()
    {
        var (cluster, d, checker) = Setup(policy: "FirstFailure", reactivation: TimeSpan.FromSeconds(10));

        Complete(checker, cluster, d, ok: 5, failed: 0, failure: ForwarderError.ResponseBodyTimedOut);
        Complete(checker, cluster, d, ok: 0, failed: 1, failure: ForwarderError.ResponseBodyTimedOut);
        var afterTimeout = d.Health;
        Complete(checker, cluster, d, ok: 0, failed: 1);
        var afterFailure = d.Health;
        _time.Advance(TimeSpan.FromSeconds(10));

        Assert.Equal(DestinationHealth.Unknown, afterTimeout);
        Assert.Equal(DestinationHealth.Unhealthy, afterFailure);
        Assert.Equal(DestinationHealth.Unknown, d.Health);
    }

    [Fact]
    public void FailureRateWindow_ManyRequests_CountsAllWithinWindow()
    {
        var window = new FailureRateWindow();
        var bucket = TimeSpan.FromSeconds(6).Ticks;
        var start = TimeSpan.FromDays(1).Ticks;

        for (var i = 0; i < 100_000; i++)
        {
            window.Record(start + i * (TimeSpan.FromSeconds(50).Ticks / 100_000), bucket, failed: i % 4 == 0);
        }

        Assert.Equal((100_000, 25_000), window.Counts(start + TimeSpan.FromSeconds(50).Ticks, bucket));
        // Past the window everything is forgotten.
        Assert.Equal((0, 0), window.Counts(start + TimeSpan.FromSeconds(120).Ticks, bucket));
    }
}
