#if NATIVE_RELAY
namespace Proxy.Forwarding.Tests;

/// <summary>The relay suite runs in the standalone proxy's runtime mode (host-mode.runsettings and the project's runtimeconfig).</summary>
public class HostModeTests
{
    [Fact]
    public void SocketCompletions_RunInline()
    {
        var flag = typeof(System.Net.Sockets.Socket).Assembly.GetType("System.Net.Sockets.SocketAsyncEngine")
            ?.GetField("InlineSocketCompletionsEnabled", System.Reflection.BindingFlags.Static | System.Reflection.BindingFlags.NonPublic | System.Reflection.BindingFlags.Public);
        Assert.NotNull(flag);
        Assert.Equal(true, flag.GetValue(null));
    }

    [Fact]
    public void ThreadPoolWorkers_DoNotSpin()
    {
        Assert.Equal(0, AppContext.GetData("System.Threading.ThreadPool.UnfairSemaphoreSpinLimit") is { } value ? Convert.ToInt32(value, System.Globalization.CultureInfo.InvariantCulture) : -1);
    }
}
#endif
