namespace Proxy.Host;

/// <summary>
/// Runtime socket settings the standalone proxy starts with. They are read once, when the runtime's socket engine
/// starts, so they are set before anything opens a socket (Program's first line), and only where the environment does
/// not already say: <c>DOTNET_SYSTEM_NET_SOCKETS_INLINE_COMPLETIONS=0</c> turns this off.
/// </summary>
internal static class SocketEngineDefaults
{
    public const string InlineCompletionsVariable = "DOTNET_SYSTEM_NET_SOCKETS_INLINE_COMPLETIONS";

    /// <summary>
    /// Socket completions run on the epoll threads instead of hopping to the thread pool first. Our receive loops only
    /// parse and hand each HTTP/2 stream to the pool, and the forwarder awaits rather than blocks, so the hop bought
    /// nothing: without it, with idle workers that do not spin (runtimeconfig), the proxy's CPU per request fell 28-35%
    /// on gRPC unary 1x70, up to 21% on GET h1 and up to 13% on GET h2c, and context switches halved (interleaved
    /// pairs, benchmarks/README.md). NOTE: code that blocks a socket continuation stalls every socket of that engine.
    /// Only the standalone proxy sets this, whose pipeline is ours; an app using the library decides for itself.
    /// </summary>
    public static void PreferInlineCompletions()
    {
        if (Environment.GetEnvironmentVariable(InlineCompletionsVariable) is null)
        {
            Environment.SetEnvironmentVariable(InlineCompletionsVariable, "1");
        }
    }

    /// <summary>
    /// What the runtime's socket engine actually does, read from its own flag (the variable alone could have been set
    /// too late): "inline on the socket threads", "on the thread pool", or "as the runtime decides" when the flag moved.
    /// </summary>
    public static string CompletionMode()
    {
        var flag = typeof(System.Net.Sockets.Socket).Assembly.GetType("System.Net.Sockets.SocketAsyncEngine")
            ?.GetField("InlineSocketCompletionsEnabled", System.Reflection.BindingFlags.Static | System.Reflection.BindingFlags.NonPublic | System.Reflection.BindingFlags.Public);
        return flag?.GetValue(null) switch
        {
            true => "inline on the socket threads",
            false => "on the thread pool",
            _ => "as the runtime decides",
        };
    }
}
