namespace Proxy.Server.Internal;

/// <summary>Chooses HTTP/2 prior knowledge versus HTTP/1.1 on a cleartext connection by peeking at its first bytes.</summary>
internal static class PrefaceDetector
{
    /// <summary>RFC 9113 §3.4: the client connection preface starts with "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" (24 octets).</summary>
    internal static ReadOnlySpan<byte> Preface => "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"u8;

    internal enum Verdict
    {
        NeedMore,
        Http2,
        Http1,
    }

    /// <summary>
    /// Waits until the first bytes decide the protocol, without consuming them (the engine reads
    /// them again). Returns true for HTTP/2. A connection that ends early is handed to HTTP/1.1,
    /// which deals with the truncated request.
    /// </summary>
    public static async ValueTask<bool> IsHttp2Async(PipeReader input, CancellationToken cancellationToken)
    {
        while (true)
        {
            var result = await input.ReadAsync(cancellationToken).ConfigureAwait(false);
            var buffer = result.Buffer;
            var verdict = Check(buffer);
            if (verdict != Verdict.NeedMore || result.IsCompleted || result.IsCanceled)
            {
                // Examined nothing: the next ReadAsync returns the same bytes at once.
                input.AdvanceTo(buffer.Start);
                return verdict == Verdict.Http2;
            }
            // Everything examined: wait for more bytes.
            input.AdvanceTo(buffer.Start, buffer.End);
        }
    }

    internal static Verdict Check(in ReadOnlySequence<byte> buffer)
    {
        var preface = Preface;
        var length = (int)Math.Min(buffer.Length, preface.Length);
        Span<byte> head = stackalloc byte[24];
        buffer.Slice(0, length).CopyTo(head);
        if (!head[..length].SequenceEqual(preface[..length]))
        {
            return Verdict.Http1; // Diverged: no need to wait for 24 bytes.
        }
        return length == preface.Length ? Verdict.Http2 : Verdict.NeedMore;
    }
}
