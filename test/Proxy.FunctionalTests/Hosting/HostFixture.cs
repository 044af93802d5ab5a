using System.Collections.Concurrent;
using Microsoft.AspNetCore.Builder;
using Microsoft.Extensions.DependencyInjection;

namespace Proxy.FunctionalTests.Hosting;

/// <summary>
/// A class fixture that starts one host per <see cref="ServerKind"/> on first use and stops them when
/// the test class is done, so a class's theories share hosts instead of starting one per case.
/// </summary>
// Owned by xUnit (one instance per test class); GetAsync may be called from parallel tests.
public abstract class HostFixture : IAsyncLifetime
{
    private readonly ConcurrentDictionary<ServerKind, Lazy<Task<TestHost>>> _hosts = new();

    /// <summary>The endpoints of the app under test.</summary>
    protected abstract void MapEndpoints(WebApplication app);

    /// <summary>The services of the app under test (e.g. <c>AddGrpc()</c>), before it is built.</summary>
    protected virtual void ConfigureServices(IServiceCollection services)
    {
    }

    protected virtual bool Https => true;

    public Task<TestHost> GetAsync(ServerKind kind) =>
        _hosts.GetOrAdd(kind, k => new Lazy<Task<TestHost>>(() => TestHost.StartAsync(k, MapEndpoints, Https, ConfigureServices))).Value;

    public Task InitializeAsync() => Task.CompletedTask;

    public async Task DisposeAsync()
    {
        foreach (var lazy in _hosts.Values)
        {
            if (lazy.IsValueCreated && lazy.Value.IsCompletedSuccessfully)
            {
                await lazy.Value.Result.DisposeAsync();
            }
        }
    }
}
