using System.Net;
using Proxy.Forwarding.BackendPools;
using Proxy.Forwarding.Configuration;

namespace Proxy.Forwarding.Tests;

public class BackendPoolTests
{
    [Fact]
    public void CreateHandler_Defaults_ProxyFriendlySettings()
    {
        using var handler = BackendPoolFactory.CreateHandler(new HttpClientConfig());

        Assert.True(handler.EnableMultipleHttp2Connections);
        Assert.False(handler.UseCookies);
        Assert.False(handler.UseProxy);
        Assert.False(handler.AllowAutoRedirect);
        Assert.Equal(DecompressionMethods.None, handler.AutomaticDecompression);
        Assert.Equal(TimeSpan.FromSeconds(10), handler.ConnectTimeout);
        Assert.Equal(TimeSpan.FromSeconds(60), handler.PooledConnectionIdleTimeout);
        Assert.Equal(Timeout.InfiniteTimeSpan, handler.PooledConnectionLifetime);
        Assert.Equal(int.MaxValue, handler.MaxConnectionsPerServer);
    }

    [Fact]
    public void CreateHandler_Configured_ValuesApplied()
    {
        using var handler = BackendPoolFactory.CreateHandler(new HttpClientConfig
        {
            EnableMultipleHttp2Connections = false,
            MaxConnectionsPerServer = 8,
            ConnectTimeout = TimeSpan.FromSeconds(2),
            PooledConnectionIdleTimeout = TimeSpan.FromSeconds(5),
            PooledConnectionLifetime = TimeSpan.FromMinutes(3),
        });

        Assert.False(handler.EnableMultipleHttp2Connections);
        Assert.Equal(8, handler.MaxConnectionsPerServer);
        Assert.Equal(TimeSpan.FromSeconds(2), handler.ConnectTimeout);
        Assert.Equal(TimeSpan.FromSeconds(5), handler.PooledConnectionIdleTimeout);
        Assert.Equal(TimeSpan.FromMinutes(3), handler.PooledConnectionLifetime);
    }

    [Fact]
    public async Task AdmissionGate_Full_WaiterQueuedThenAdmittedOnRelease()
    {
        var gate = new AdmissionGate(1, TimeSpan.FromSeconds(30), 10);
        var queueChanges = new QueueRecorder();
        Assert.Equal(AdmissionResult.Admitted, await gate.AcquireAsync(null, CancellationToken.None));

        var waiter = gate.AcquireAsync(queueChanges, CancellationToken.None).AsTask();
        Assert.False(waiter.IsCompleted);
        Assert.Equal(1, gate.QueueLength);
        gate.Release();

        Assert.Equal(AdmissionResult.Admitted, await waiter.WaitAsync(TimeSpan.FromSeconds(10)));
        Assert.Equal(0, gate.QueueLength);
        Assert.Equal([1, -1], queueChanges.Changes);
    }

    private sealed class QueueRecorder : IAdmissionObserver
    {
        public List<int> Changes { get; } = [];

        public long Queued()
        {
            lock (Changes) { Changes.Add(1); }
            return 42;
        }

        public void Dequeued(long queuedTimestamp)
        {
            Assert.Equal(42, queuedTimestamp);
            lock (Changes) { Changes.Add(-1); }
        }
    }

    [Fact]
    public async Task AdmissionGate_NoSlotInTime_TimedOut()
    {
        var gate = new AdmissionGate(1, TimeSpan.FromMilliseconds(50), 10);
        await gate.AcquireAsync(null, CancellationToken.None);

        Assert.Equal(AdmissionResult.TimedOut, await gate.AcquireAsync(null, CancellationToken.None));
        Assert.Equal(0, gate.QueueLength);
    }

    [Fact]
    public async Task AdmissionGate_QueueAtLimit_QueueFullImmediately()
    {
        var gate = new AdmissionGate(1, TimeSpan.FromMinutes(1), 1);
        await gate.AcquireAsync(null, CancellationToken.None);
        var queued = gate.AcquireAsync(null, CancellationToken.None).AsTask();

        Assert.Equal(AdmissionResult.QueueFull, await gate.AcquireAsync(null, CancellationToken.None));
        gate.Release();
        Assert.Equal(AdmissionResult.Admitted, await queued.WaitAsync(TimeSpan.FromSeconds(10)));
    }

    [Fact]
    public async Task AdmissionGate_ClientGoneWhileQueued_ThrowsAndLeavesQueue()
    {
        var gate = new AdmissionGate(1, TimeSpan.FromMinutes(1), 10);
        await gate.AcquireAsync(null, CancellationToken.None);
        using var cts = new CancellationTokenSource();
        var queued = gate.AcquireAsync(null, cts.Token).AsTask();

        cts.Cancel();

        await Assert.ThrowsAnyAsync<OperationCanceledException>(() => queued);
        Assert.Equal(0, gate.QueueLength);
    }

    [Fact]
    public async Task AdmissionGate_Unbounded_AlwaysAdmits()
    {
        for (var i = 0; i < 1000; i++)
        {
            Assert.Equal(AdmissionResult.Admitted, await AdmissionGate.Unbounded.AcquireAsync(null, CancellationToken.None));
        }
    }
}
