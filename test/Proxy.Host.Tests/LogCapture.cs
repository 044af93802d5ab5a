using Microsoft.Extensions.Logging;

namespace Proxy.Host.Tests;

/// <summary>A logger provider that lets a test wait for a message (an event, not a sleep).</summary>
// Shared by every logger of one host (any thread) and the test that awaits it; guarded by its own lock.
public sealed class LogCapture : ILoggerProvider
{
    private readonly object _lock = new();
    private readonly List<LogEntry> _entries = [];
    private readonly List<(Func<LogEntry, bool> Match, TaskCompletionSource<LogEntry> Found)> _waiters = [];

    /// <summary>Completes with the first message (seen already or to come) that <paramref name="match"/> accepts.</summary>
    public async Task<string> WaitForAsync(Func<string, bool> match) => (await WaitForEntryAsync(e => match(e.Message))).Message;

    /// <summary>Completes with the first entry (seen already or to come) that <paramref name="match"/> accepts: category and structured fields too.</summary>
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
            _waiters.Add((match, found));
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

    public ILogger CreateLogger(string categoryName) => new Logger(this, categoryName);

    public void Dispose()
    {
    }

    private void Add(LogEntry entry)
    {
        lock (_lock)
        {
            _entries.Add(entry);
            foreach (var waiter in _waiters.Where(w => w.Match(entry)).ToList())
            {
                waiter.Found.TrySetResult(entry);
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
            var fields = state as IReadOnlyList<KeyValuePair<string, object?>> ?? [];
            capture.Add(new LogEntry(category, eventId.Id, formatter(state, exception), fields.ToDictionary(f => f.Key, f => f.Value)));
        }
    }
}

/// <summary>One captured message with its category, event id and structured fields ({OriginalFormat} included).</summary>
public sealed record LogEntry(string Category, int EventId, string Message, IReadOnlyDictionary<string, object?> Fields);
