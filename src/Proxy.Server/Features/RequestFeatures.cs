using System.Net.Security;
using System.Security.Authentication;
using System.Security.Cryptography.X509Certificates;
using Microsoft.AspNetCore.Connections.Features;
using Microsoft.Extensions.Primitives;
using Proxy.Server.Internal;

namespace Proxy.Server.Features;

// Owned by the app's request thread of control (created by the handler; the engine never touches
// it). OnStarting/OnCompleted lists are only touched from that flow. The handler keeps it in the exchange's
// HostState and resets it when the engine hands that exchange again (see ResetForNextRequest).
/// <summary>
/// One request's ASP.NET Core features over an <see cref="HttpExchange"/>. One object implements
/// them all and is its own <see cref="IFeatureCollection"/> (RequestFeatures.Collection.cs), like
/// Kestrel's HttpProtocol: no feature dictionary per request. It is reused with its exchange (the
/// next request on an HTTP/1.1 connection, a pooled HTTP/2 stream's next life), together with the
/// HttpContext the host keeps in it (<see cref="HostedRequestFeatures{TContext}"/>).
/// This file: the request side. RequestFeatures.Response.cs: the response side.
/// </summary>
internal partial class RequestFeatures :
    IHttpRequestFeature,
    IHttpRequestBodyDetectionFeature,
    IRequestBodyPipeFeature,
    IHttpMaxRequestBodySizeFeature,
    IHttpRequestTrailersFeature,
    IHttpRequestLifetimeFeature,
    IHttpConnectionFeature,
    IHttpUpgradeFeature,
    IHttpRequestIdentifierFeature
{
    /// <summary>RFC 9113 §7 INTERNAL_ERROR (0x2): Kestrel resets with it when the app aborts.</summary>
    internal const uint InternalError = 0x2;

    private readonly RequestBodyReader _bodyReader;
    private readonly RequestHeaders _requestHeaders = new();
    private Stream? _requestBodyStream;
    private Stream? _requestBodyOverride;
    private IHeaderDictionary? _requestTrailers;
    private CancellationToken? _requestAborted;
    private string? _traceIdentifier;
    private string? _splitTarget;
    private string _splitPath = "";
    private string _splitQuery = "";

    public RequestFeatures(HttpExchange exchange, ProxyServerOptions options, DateHeaderCache dateCache)
    {
        Exchange = exchange;
        _options = options;
        _dateCache = dateCache;
        IsHttp2 = exchange.Protocol == "HTTP/2";
        _bodyReader = new RequestBodyReader(exchange);
        _responseHeaders = new HeaderDictionary();
        _bodyWriter = new ResponseBodyWriter(this);
        if (exchange.Connection.IsTls)
        {
            _tls = new RequestTlsFeature(exchange.Connection);
        }
        ResetFeatureCollection();
        InitializeRequest();
    }

    public HttpExchange Exchange { get; }

    /// <summary>The collection handed to IHttpApplication.CreateContext: this object.</summary>
    public IFeatureCollection Features => this;

    internal bool IsHttp2 { get; }

    /// <summary>
    /// Readies the features for the next request on the same exchange (HTTP/1.1 keep-alive, a pooled HTTP/2
    /// stream's next life): the previous request's handler has returned, its response is complete and its
    /// OnCompleted callbacks have run.
    /// </summary>
    public void ResetForNextRequest()
    {
        _requestBodyOverride = null;
        _requestTrailers = null;
        _requestAborted = null;
        _traceIdentifier = null;
        PathBase = "";
        ResetResponse();
        ResetFeatureCollection();
        InitializeRequest();
    }

    /// <summary>Copies the exchange's request into the features.</summary>
    private void InitializeRequest()
    {
        var exchange = Exchange;
        Protocol = exchange.Protocol;
        Scheme = exchange.Scheme.Length > 0 ? exchange.Scheme : exchange.Connection.Scheme;
        Method = exchange.Method;
        if (!ReferenceEquals(_splitTarget, exchange.RawTarget))
        {
            // The engine hands the same string for a repeated target: then the split is reused.
            _splitTarget = exchange.RawTarget;
            (_splitPath, _splitQuery) = RequestTarget.Split(exchange.RawTarget);
        }
        RawTarget = _splitTarget;
        Path = _splitPath;
        QueryString = _splitQuery;
        _requestHeaders.Reset(exchange);
        Headers = _requestHeaders;
        _bodyReader.Reset(_options.MaxRequestBodySize);

        var connection = exchange.Connection;
        ConnectionId = connection.ConnectionId;
        // Always written: on a reused (keep-alive) instance an app may have changed them (e.g. forwarded headers).
        var local = connection.LocalEndPoint as IPEndPoint;
        LocalIpAddress = local?.Address;
        LocalPort = local?.Port ?? 0;
        var remote = connection.RemoteEndPoint as IPEndPoint;
        RemoteIpAddress = remote?.Address;
        RemotePort = remote?.Port ?? 0;
    }

    // ---- IHttpRequestFeature ----
    public string Protocol { get; set; } = "";
    public string Scheme { get; set; } = "";
    public string Method { get; set; } = "";
    public string PathBase { get; set; } = "";
    public string Path { get; set; } = "";
    public string QueryString { get; set; } = "";
    public string RawTarget { get; set; } = "";
    public IHeaderDictionary Headers { get; set; } = null!;

    Stream IHttpRequestFeature.Body
    {
        // The wrapper keeps no state of its own (leaveOpen: disposing it does not complete the reader), so it is reused.
        get => _requestBodyOverride ?? (_requestBodyStream ??= _bodyReader.AsStream(leaveOpen: true));
        set => _requestBodyOverride = value;
    }

    // ---- IRequestBodyPipeFeature / IHttpRequestBodyDetectionFeature ----
    PipeReader IRequestBodyPipeFeature.Reader => _bodyReader;

    public bool CanHaveBody => Exchange.RequestHasBody;

    // ---- IHttpMaxRequestBodySizeFeature ----
    // (IFeatureCollection.IsReadOnly is implemented explicitly in RequestFeatures.Collection.cs.)
    public bool IsReadOnly => _bodyReader.HasStartedReading;

    public long? MaxRequestBodySize
    {
        get => _bodyReader.MaxBodySize;
        set
        {
            if (IsReadOnly)
            {
                throw new InvalidOperationException("The maximum request body size cannot be changed after the body was read.");
            }
            if (value < 0)
            {
                throw new ArgumentOutOfRangeException(nameof(value), "The limit must be non-negative.");
            }
            _bodyReader.MaxBodySize = value;
        }
    }

    // ---- IHttpRequestTrailersFeature ----
    public bool Available => !Exchange.RequestHasBody || _bodyReader.IsBodyCompleted;

    public IHeaderDictionary Trailers
    {
        get
        {
            if (!Available)
            {
                throw new InvalidOperationException("The request trailers are not available yet: read the body to its end first.");
            }
            if (_requestTrailers is null)
            {
                var trailers = new HeaderDictionary();
                foreach (var (name, value) in Exchange.RequestTrailers)
                {
                    trailers.Append(name, value);
                }
                trailers.IsReadOnly = true;
                _requestTrailers = trailers;
            }
            return _requestTrailers;
        }
    }

    // ---- IHttpRequestLifetimeFeature ----
    public CancellationToken RequestAborted
    {
        get => _requestAborted ?? Exchange.RequestAborted;
        set => _requestAborted = value;
    }

    public void Abort() => Exchange.Abort(InternalError);

    // ---- IHttpConnectionFeature ----
    public string ConnectionId { get; set; } = "";
    public IPAddress? RemoteIpAddress { get; set; }
    public IPAddress? LocalIpAddress { get; set; }
    public int RemotePort { get; set; }
    public int LocalPort { get; set; }

    // ---- IHttpRequestIdentifierFeature ----
    public string TraceIdentifier
    {
        get => _traceIdentifier ??= Exchange.Connection.ConnectionId + ":" + Interlocked.Increment(ref s_requestCounter).ToString("x8", System.Globalization.CultureInfo.InvariantCulture);
        set => _traceIdentifier = value;
    }

    private static long s_requestCounter;

    // ---- IHttpUpgradeFeature: upgrades (WebSockets over HTTP/1.1, h2c Upgrade) are not supported. ----
    public bool IsUpgradableRequest => false;

    public Task<Stream> UpgradeAsync() => throw new InvalidOperationException("This server does not support HTTP upgrades.");

    /// <summary>TLS details of the connection, from the metadata the engine received.</summary>
    private sealed class RequestTlsFeature(ConnectionMetadata connection) : ITlsConnectionFeature, ITlsHandshakeFeature
    {
        public X509Certificate2? ClientCertificate { get; set; } = connection.ClientCertificate;

        public Task<X509Certificate2?> GetClientCertificateAsync(CancellationToken cancellationToken) => Task.FromResult(ClientCertificate);

        public SslProtocols Protocol => connection.TlsProtocol;

        public TlsCipherSuite? NegotiatedCipherSuite => connection.NegotiatedCipherSuite;

        public string HostName => connection.HostName ?? "";

#pragma warning disable SYSLIB0058, CS0618 // Legacy members of the interface; the cipher suite above replaces them.
        public CipherAlgorithmType CipherAlgorithm => CipherAlgorithmType.None;
        public int CipherStrength => 0;
        public HashAlgorithmType HashAlgorithm => HashAlgorithmType.None;
        public int HashStrength => 0;
        public ExchangeAlgorithmType KeyExchangeAlgorithm => ExchangeAlgorithmType.None;
        public int KeyExchangeStrength => 0;
#pragma warning restore SYSLIB0058, CS0618
    }
}
