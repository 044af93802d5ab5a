namespace Proxy.Codecs.Http1;

/// <summary>The HTTP-version of a request line (RFC 9112 §2.3). Other versions are rejected with 505.</summary>
public enum Http1Version : byte
{
    Http10 = 0,
    Http11 = 1,
}

/// <summary>The four forms of request-target (RFC 9112 §3.2).</summary>
public enum Http1TargetForm : byte
{
    /// <summary>absolute-path [ "?" query ], e.g. "/a/b?c".</summary>
    Origin,
    /// <summary>absolute-URI, e.g. "http://example.com/a" (requests to a proxy).</summary>
    Absolute,
    /// <summary>host:port, only with CONNECT.</summary>
    Authority,
    /// <summary>"*", only with OPTIONS.</summary>
    Asterisk,
}

/// <summary>How a message body is delimited (RFC 9112 §6.3).</summary>
public enum Http1BodyFraming : byte
{
    /// <summary>No body (neither Content-Length nor Transfer-Encoding, or Content-Length: 0; a response to HEAD, 1xx, 204, 304).</summary>
    None,
    ContentLength,
    Chunked,
    /// <summary>Responses only: the body runs until the server closes the connection (RFC 9112 §6.3 item 8).</summary>
    UntilClose,
}

/// <summary>Limits applied while parsing; exceeding them yields 414 or 431.</summary>
public readonly record struct Http1ParserLimits(int MaxRequestLineSize, int MaxHeadersTotalSize, int MaxHeaderCount)
{
    /// <summary>Kestrel's defaults: 8 KiB request line, 32 KiB headers, 100 fields.</summary>
    public static Http1ParserLimits Default => new(8 * 1024, 32 * 1024, 100);
}

/// <summary>Receives header (or trailer) fields as they are parsed. Spans are only valid during the call.</summary>
public interface IHttp1FieldSink
{
    /// <summary><paramref name="name"/> is a validated token; <paramref name="value"/> is trimmed of OWS and free of CTLs other than HTAB.</summary>
    void OnField(ReadOnlySpan<byte> name, ReadOnlySpan<byte> value);
}

/// <summary>Receives the parts of a request head. Called only once the whole head has arrived.</summary>
public interface IHttp1RequestSink : IHttp1FieldSink
{
    void OnRequestLine(ReadOnlySpan<byte> method, ReadOnlySpan<byte> target, Http1Version version, Http1TargetForm form);
}

/// <summary>What the parser concluded from the head's framing and connection-control fields.</summary>
public readonly record struct Http1RequestHead
{
    public Http1Version Version { get; init; }
    public Http1TargetForm TargetForm { get; init; }
    public Http1BodyFraming Framing { get; init; }
    /// <summary>The declared length when <see cref="Framing"/> is ContentLength, or 0 with an explicit "Content-Length: 0"; -1 when absent.</summary>
    public long ContentLength { get; init; }
    /// <summary>True when the connection may carry another request after this one (RFC 9112 §9.3).</summary>
    public bool KeepAlive { get; init; }
    /// <summary>"Expect: 100-continue" on an HTTP/1.1 request (RFC 9110 §10.1.1; ignored for HTTP/1.0).</summary>
    public bool ExpectContinue { get; init; }
    /// <summary>"TE: trailers": the client accepts trailer fields in a chunked response (RFC 9110 §10.1.4).</summary>
    public bool AcceptsTrailers { get; init; }
    /// <summary>An Upgrade header field was present (RFC 9110 §7.8).</summary>
    public bool HasUpgrade { get; init; }
    /// <summary>Number of bytes the head occupied, request line through the empty line.</summary>
    public int HeadLength { get; init; }
}

/// <summary>Limits applied while parsing a response head (the client side).</summary>
public readonly record struct Http1ResponseLimits(int MaxHeadSize, int MaxFieldCount)
{
    /// <summary>64 KiB for the status line and all fields, 100 fields.</summary>
    public static Http1ResponseLimits Default => new(64 * 1024, 100);
}

/// <summary>Receives the parts of a response head. Called only once the whole head has arrived.</summary>
public interface IHttp1ResponseSink : IHttp1FieldSink
{
    /// <summary><paramref name="reason"/> may be empty; it is free of CTLs other than HTAB.</summary>
    void OnStatusLine(Http1Version version, int statusCode, ReadOnlySpan<byte> reason);
}

/// <summary>What the response parser concluded from the status line and the framing fields.</summary>
public readonly record struct Http1ResponseHead
{
    public Http1Version Version { get; init; }
    public int StatusCode { get; init; }
    /// <summary>How the body that follows is delimited (None for HEAD, 1xx, 204 and 304 whatever the fields say).</summary>
    public Http1BodyFraming Framing { get; init; }
    /// <summary>The declared Content-Length (also on a HEAD or 304 response, where it describes a body not sent); -1 when absent.</summary>
    public long ContentLength { get; init; }
    /// <summary>True when the connection may carry another exchange after this response (RFC 9112 §9.3).</summary>
    public bool KeepAlive { get; init; }
    /// <summary>Number of bytes the head occupied, status line through the empty line.</summary>
    public int HeadLength { get; init; }
}
