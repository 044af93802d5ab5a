using Microsoft.Extensions.Logging;

namespace Proxy.Host.Tests;

/// <summary>A logger provider that lets a test wait for a message (an event, not a sleep).</summary>
// Shared by every logger of one host (any thread) and the test that awaits it; guarded by its own lock.
public sealed class LogCapture : ILoggerProvider
{
    private readonly object _lock = new();
    private readonly List<string> _messages = [];
    private readonly List<(Func<string, bool> Match, TaskCompletionSource<string> Found)> _waiters = [];
    private readonly List<LogEntry> _entries = [];
    private readonly List<(Func<LogEntry, bool> Match, TaskCompletionSource<LogEntry> Found)> _entryWaiters = [];

    /// <summary>Completes with the first entry (seen already or to come) that <paramref name="match"/> accepts: category and structured state too.</summary>
    public Task<LogEntry> WaitForEntryAsync(Func<LogEntry, bool> match)
    {
        lock (_lock)
        {
            var seen = _entries.FirstOrDefault(match);
            if (seen is not null)
            {
                return Task.FromResult(seen);
            }

            var found = new TaskCompletionSource<LogEntry>(TaskCreationOptions.RunContinuationsAsynchronously);
            _entryWaiters.Add((match, found));
            return found.Task;
        }
    }

    /// <summary>Every entry of <paramref name="category"/> so far.</summary>
    public List<LogEntry> Entries(string category)
    {
        lock (_lock)
        {
            return _entries.Where(e => e.Category == category).ToList();
        }
    }

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

    public ILogger CreateLogger(string categoryName) => new Logger(this, categoryName);

    public void Dispose()
    {
    }

    private void Add(string message, LogEntry entry)
    {
        lock (_lock)
        {
            _entries.Add(entry);
            foreach (var waiter in _entryWaiters.Where(w => w.Match(entry)).ToList())
            {
                waiter.Found.TrySetResult(entry);
                _entryWaiters.Remove(waiter);
            }

            _messages.Add(message);
            foreach (var waiter in _waiters.Where(w => w.Match(message)).ToList())
            {
                waiter.Found.TrySetResult(message);
                _waiters.Remove(waiter);
            }
        }
    }

    private sealed class Logger(LogCapture capture, string category) : ILogger
    {
        public IDisposable? BeginScope<TState>(TState state) where TState : notnull => null;

        public bool IsEnabled(LogLevel logLevel) => true;

        public void Log<TState>(LogLevel logLevel, EventId eventId, TState state, Exception? exception, Func<TState, Exception?, string> formatter)
        {
            var message = formatter(state, exception);
            var fields = state as IReadOnlyList<KeyValuePair<string, object?>> ?? [];
            capture.Add(message, new LogEntry(category, eventId.Id, message, fields.ToDictionary(f => f.Key, f => f.Value)));
        }
    }
}

/// <summary>One captured message with its category, event id and structured fields ({OriginalFormat} included).</summary>
public sealed record LogEntry(string Category, int EventId, string Message, IReadOnlyDictionary<string, object?> Fields);
