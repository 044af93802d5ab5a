using System.Buffers;
using System.Buffers.Text;
using System.Net;

namespace Proxy.Load.Client;

/// <summary>
/// sse: EventSource-style streams held open on GET /sse?rate=N. Each event is one "request"; its latency is the
/// client's wall clock at read minus the server timestamp in the event (same machine, same clock). Gaps in the
/// sequence within one connection are lost events; a stream that ends or fails is reopened (a reconnect).
/// </summary>
public sealed class SseScenario(LoadOptions options) : HttpClientScenario(options)
{
    private static ReadOnlySpan<byte> EventEnd => "\n\n"u8;

    private static ReadOnlySpan<byte> DataPrefix => "data: "u8;

    private readonly Uri _uri = new(options.Url, options.EverySeconds is { } every ? $"/sse?every={every}" : $"/sse?rate={options.Rate}");

    /// <summary>HTTP/1.1 holds one stream per connection, so a handler needs as many connections as streams.</summary>
    public override int ConnectionsPerHandler => Options.HttpVersion == HttpVersion.Version20 ? 1 : Options.Streams;

    public override async Task RunStreamAsync(HttpMessageInvoker connection, WorkerStats stats, RunState state)
    {
        var buffer = ArrayPool<byte>.Shared.Rent(16 * 1024);
        var stopping = state.Stopping;
        var first = true;
        try
        {
            while (!stopping.IsCancellationRequested)
            {
                if (!first)
                {
                    stats.Reconnected(state);
                }

                first = false;
                try
                {
                    using var request = ConnectionFactory.Request(HttpMethod.Get, _uri, Options.HttpVersion);
                    request.Headers.TryAddWithoutValidation("accept", "text/event-stream");
                    using var response = await connection.SendAsync(request, stopping);
                    if (response.StatusCode != HttpStatusCode.OK)
                    {
                        stats.BadResponse(state, $"HTTP {(int)response.StatusCode} on /sse");
                        continue;
                    }

                    await using var body = await response.Content.ReadAsStreamAsync(stopping);
                    await ReadEventsAsync(body, buffer, stats, state);
                    stats.BadResponse(state, "The server ended an SSE stream.");
                }
                catch (Exception) when (IsStopping(state))
                {
                    return;
                }
                catch (Exception ex)
                {
                    stats.Failed(state, ex);
                }
            }
        }
        finally
        {
            ArrayPool<byte>.Shared.Return(buffer);
        }
    }

    private static async Task ReadEventsAsync(Stream body, byte[] buffer, WorkerStats stats, RunState state)
    {
        var start = 0;
        var end = 0;
        long lastSeq = 0;
        while (true)
        {
            if (start == end)
            {
                start = end = 0;
            }
            else if (end == buffer.Length)
            {
                buffer.AsSpan(start, end - start).CopyTo(buffer);
                end -= start;
                start = 0;
                if (end == buffer.Length)
                {
                    throw new InvalidDataException("An SSE event larger than the read buffer.");
                }
            }

            var read = await body.ReadAsync(buffer.AsMemory(end), state.Stopping);
            if (read == 0)
            {
                return;
            }

            end += read;
            var nowNs = UnixNanoseconds();
            var received = read;
            while (true)
            {
                var pending = buffer.AsSpan(start, end - start);
                var boundary = pending.IndexOf(EventEnd);
                if (boundary < 0)
                {
                    break;
                }

                var evt = pending[..boundary];
                start += boundary + EventEnd.Length;
                if (evt.IsEmpty || evt[0] == (byte)':')
                {
                    continue; // a comment (": ok")
                }

                if (!TryParse(evt, out var timestampNs, out var seq))
                {
                    throw new InvalidDataException("A malformed SSE event (expected 'data: <unix-ns> <seq>').");
                }

                if (lastSeq != 0 && seq != lastSeq + 1)
                {
                    stats.LostEvents(state, Math.Max(0, seq - lastSeq - 1));
                }

                lastSeq = seq;
                stats.CompletedWithLatency(state, nowNs - timestampNs, received);
                received = 0; // the bytes of one read are counted once
            }
        }
    }

    private static bool TryParse(ReadOnlySpan<byte> evt, out long timestampNs, out long seq)
    {
        seq = 0;
        timestampNs = 0;
        if (!evt.StartsWith(DataPrefix))
        {
            return false;
        }

        var rest = evt[DataPrefix.Length..];
        if (!Utf8Parser.TryParse(rest, out timestampNs, out var consumed) || consumed >= rest.Length || rest[consumed] != (byte)' ')
        {
            return false;
        }

        rest = rest[(consumed + 1)..];
        return Utf8Parser.TryParse(rest, out seq, out consumed) && consumed == rest.Length;
    }

    public static long UnixNanoseconds() => (DateTime.UtcNow.Ticks - DateTime.UnixEpoch.Ticks) * 100;
}
