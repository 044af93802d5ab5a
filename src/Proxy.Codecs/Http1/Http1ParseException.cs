namespace Proxy.Codecs.Http1;

/// <summary>
/// A request that violates RFC 9112 (or one of our limits). The connection answers with
/// <see cref="StatusCode"/> and <see cref="Reason"/> and then closes: after a framing error the
/// rest of the byte stream cannot be trusted (RFC 9112 §6.3).
/// </summary>
public sealed class Http1ParseException : Exception
{
    public Http1ParseException(int statusCode, string reason)
        : base(reason)
    {
        StatusCode = statusCode;
        Reason = reason;
    }

    /// <summary>
    /// 400, 414, 431, 501 or 505 for a request. For a response head (<see cref="Http1ResponseParser"/>) the code
    /// means nothing: the client turns any of them into a 502; only <see cref="Reason"/> matters.
    /// </summary>
    public int StatusCode { get; }

    /// <summary>A short, stable, client-safe explanation (no request bytes echoed).</summary>
    public string Reason { get; }

    /// <summary>
    /// True when the first line carries no HTTP/1.x version at all, so the peer is not speaking
    /// HTTP/1 (a broken HTTP/2 preface on a cleartext port that accepts both, for example).
    /// The connection closes without answering in a protocol the peer may not speak.
    /// </summary>
    public bool IsUnrecognizedProtocol { get; init; }

    internal static Http1ParseException BadRequest(string reason) => new(400, reason);

    /// <summary>A response head that violates RFC 9112 (the client side): 502, the status a gateway answers with.</summary>
    internal static Http1ParseException BadResponse(string reason) => new(502, reason);

    internal static Http1ParseException UnrecognizedProtocol(string reason) => new(400, reason) { IsUnrecognizedProtocol = true };
}
