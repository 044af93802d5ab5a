using System.Text.Json;

namespace Proxy.Host.Tests;

/// <summary>The runtime settings the standalone proxy ships with (its runtimeconfig.json), as `dotnet Proxy.Host.dll` reads them.</summary>
public sealed class RuntimeConfigTests
{
    private static JsonElement ConfigProperties()
    {
        var path = Path.Combine(AppContext.BaseDirectory, "Proxy.Host.runtimeconfig.json");
        using var document = JsonDocument.Parse(File.ReadAllText(path));
        return document.RootElement.GetProperty("runtimeOptions").GetProperty("configProperties").Clone();
    }

    [Fact]
    public void ThreadPool_IdleWorkersDoNotSpin()
    {
        // Spinning idle workers (sched_yield in LowLevelLifoSemaphore.Wait) were 17% of the proxy's CPU on gRPC unary.
        Assert.Equal(0, ConfigProperties().GetProperty("System.Threading.ThreadPool.UnfairSemaphoreSpinLimit").GetInt32());
    }

    [Fact]
    public void Gc_IsServer()
    {
        Assert.True(ConfigProperties().GetProperty("System.GC.Server").GetBoolean());
    }
}
