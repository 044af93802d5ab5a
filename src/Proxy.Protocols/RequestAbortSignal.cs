namespace Proxy.Protocols;

/// <summary>
/// How the engines fire an exchange's RequestAborted when the peer is gone: the token is cancelled at once, and the
/// app's callbacks registered on it run later on the thread pool.
/// </summary>
/// <remarks>
/// NOTE: the order matters to apps. The engine calls this before it fails the request body, so an app whose body
/// read throws already sees <c>RequestAborted.IsCancellationRequested</c> in its catch (grpc-dotnet tells a
/// cancelled call from a failed one that way). <see cref="CancellationTokenSource.CancelAsync"/> gives both
/// halves: the state flips synchronously, the callbacks are queued. So the caller may be a connection loop or hold
/// a lock: no app code runs on it. The CancellationTokenSource must then not be disposed (its queued callbacks
/// would be dropped); the engines replace a cancelled one instead.
/// </remarks>
// Stateless.
internal static class RequestAbortSignal
{
    public static void Fire(CancellationTokenSource source)
    {
        var callbacks = source.CancelAsync();
        if (callbacks.IsCompleted)
        {
            Observe(callbacks);
            return;
        }
        callbacks.ContinueWith(static task => Observe(task), CancellationToken.None,
            TaskContinuationOptions.ExecuteSynchronously, TaskScheduler.Default);
    }

    /// <summary>An app callback that threw (or a disposed source) must not surface as an unobserved task exception.</summary>
    private static void Observe(Task callbacks)
    {
        if (callbacks.IsFaulted)
        {
            _ = callbacks.Exception;
        }
    }
}
