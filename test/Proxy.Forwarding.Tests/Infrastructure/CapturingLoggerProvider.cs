using System.Collections.Concurrent;
using Microsoft.Extensions.Logging;

namespace Proxy.Forwarding.Tests.Infrastructure;

/// <summary>One log entry as the app wrote it.</summary>
public sealed record CapturedLogEntry(string Category, LogLevel Level, EventId EventId, string Message, Exception? Exception)
{
    public override string ToString() => $"{Level} {Category}[{EventId.Id}]: {Message}{(Exception is null ? "" : " | " + Exception.GetType().Name)}";
}

/// <summary>
/// Keeps every entry the proxy app logs (all categories, Debug and up), so a test can assert what an operator would
/// see: levels, messages, whether a stack trace came with it. Add it with <c>builder.Logging.AddProvider</c>.
/// </summary>
// Shared by the app's loggers (any thread) and the test; the queue is thread-safe.
public sealed class CapturingLoggerProvider : ILoggerProvider
{
    private readonly ConcurrentQueue<CapturedLogEntry> _entries = new();

    public IReadOnlyList<CapturedLogEntry> Entries => _entries.ToArray();

    /// <summary>Entries at Warning or above: what the default production filter shows.</summary>
    public IReadOnlyList<CapturedLogEntry> Warnings => _entries.Where(e => e.Level >= LogLevel.Warning).ToArray();

    public ILogger CreateLogger(string categoryName) => new CapturingLogger(this, categoryName);

    public void Dispose()
    {
    }

    private sealed class CapturingLogger(CapturingLoggerProvider owner, string category) : ILogger
    {
        public IDisposable? BeginScope<TState>(TState state) where TState : notnull => null;

        public bool IsEnabled(LogLevel logLevel) => logLevel >= LogLevel.Debug;

        public void Log<TState>(LogLevel logLevel, EventId eventId, TState state, Exception? exception, Func<TState, Exception?, string> formatter)
        {
            if (IsEnabled(logLevel))
            {
                owner._entries.Enqueue(new CapturedLogEntry(category, logLevel, eventId, formatter(state, exception), exception));
            }
        }
    }
}
