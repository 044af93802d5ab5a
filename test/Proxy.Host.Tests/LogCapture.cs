using Microsoft.Extensions.Logging;

namespace Proxy.Host.Tests;

/// <summary>A logger provider that lets a test wait for a message (an event, not a sleep).</summary>
// Shared by every logger of one host (any thread) and the test that awaits it; guarded by its own lock.
public sealed class LogCapture : ILoggerProvider
{
    private readonly object _lock = new();
    private readonly List<string> _messages = [];
    private readonly List<(Func<string, bool> Match, TaskCompletionSource<string> Found)> _waiters = [];

    /// <summary>Completes with the first message (seen already or to come) that <paramref name="match"/> accepts.</summary>
    public Task<string> WaitForAsync(Func<string, bool> match)
    {
        lock (_lock)
        {
            var seen = _messages.FirstOrDefault(match);
            if (seen is not null)
            {
                return Task.FromResult(seen);
            }

            var found = new TaskCompletionSource<string>(TaskCreationOptions.RunContinuationsAsynchronously);
            _waiters.Add((match, found));
            return found.Task;
        }
    }

    public ILogger CreateLogger(string categoryName) => new Logger(this);

    public void Dispose()
    {
    }

    private void Add(string message)
    {
        lock (_lock)
        {
            _messages.Add(message);
            foreach (var waiter in _waiters.Where(w => w.Match(message)).ToList())
            {
                waiter.Found.TrySetResult(message);
                _waiters.Remove(waiter);
            }
        }
    }

    private sealed class Logger(LogCapture capture) : ILogger
    {
        public IDisposable? BeginScope<TState>(TState state) where TState : notnull => null;

        public bool IsEnabled(LogLevel logLevel) => true;

        public void Log<TState>(LogLevel logLevel, EventId eventId, TState state, Exception? exception, Func<TState, Exception?, string> formatter)
            => capture.Add(formatter(state, exception));
    }
}
