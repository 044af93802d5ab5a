using System.Collections;
using Microsoft.AspNetCore.Connections.Features;
using Microsoft.AspNetCore.Hosting.Server.Abstractions;

namespace Proxy.Server.Features;

/// <summary>
/// The feature collection side: the server's own features live in fixed slots (a type test picks the slot,
/// no dictionary), whatever the app or middleware adds (routing's endpoint, items, authentication, ...) in a
/// short list. Both are put back to the server's defaults when the object is reset for the next request.
/// </summary>
internal partial class RequestFeatures : IFeatureCollection
{
    // Slot order; DefaultSlot gives each slot's server default.
    private const int RequestSlot = 0;
    private const int BodyDetectionSlot = 1;
    private const int BodyPipeSlot = 2;
    private const int MaxBodySizeSlot = 3;
    private const int RequestTrailersSlot = 4;
    private const int LifetimeSlot = 5;
    private const int ConnectionSlot = 6;
    private const int UpgradeSlot = 7;
    private const int IdentifierSlot = 8;
    private const int ResponseSlot = 9;
    private const int ResponseBodySlot = 10;
    private const int ResponseTrailersSlot = 11;
    private const int ResetSlot = 12;
    private const int TlsConnectionSlot = 13;
    private const int TlsHandshakeSlot = 14;
    private const int SlotCount = 15;

    private readonly RequestTlsFeature? _tls;
    private readonly object?[] _slots = new object?[SlotCount];
    private List<KeyValuePair<Type, object>>? _extra;
    private int _revision;

    bool IFeatureCollection.IsReadOnly => false;

    public int Revision => _revision;

    public object? this[Type key]
    {
        get
        {
            var slot = SlotOf(key);
            return slot >= 0 ? _slots[slot] : Extra(key);
        }
        set
        {
            ArgumentNullException.ThrowIfNull(key);
            _revision++;
            var slot = SlotOf(key);
            if (slot >= 0)
            {
                _slots[slot] = value;
                return;
            }
            var extra = _extra ??= new List<KeyValuePair<Type, object>>(4);
            for (var i = 0; i < extra.Count; i++)
            {
                if (extra[i].Key == key)
                {
                    if (value is null)
                    {
                        extra.RemoveAt(i);
                    }
                    else
                    {
                        extra[i] = new(key, value);
                    }
                    return;
                }
            }
            if (value is not null)
            {
                extra.Add(new(key, value));
            }
        }
    }

    // NOTE: ASP.NET Core asks for 20-30 features per request, many of them absent. The slot of each feature type is
    // found once per type (a static of a generic class) instead of by up to 15 Type comparisons per call.
    public TFeature? Get<TFeature>()
    {
        var slot = SlotCache<TFeature>.Slot;
        return (TFeature?)(slot >= 0 ? _slots[slot] : Extra(typeof(TFeature)));
    }

    public void Set<TFeature>(TFeature? instance) => this[typeof(TFeature)] = instance;

    private object? Extra(Type key)
    {
        if (_extra is { } extra)
        {
            foreach (var entry in extra)
            {
                if (entry.Key == key)
                {
                    return entry.Value;
                }
            }
        }

        return null;
    }

    private static class SlotCache<TFeature>
    {
        public static readonly int Slot = SlotOf(typeof(TFeature));
    }

    public IEnumerator<KeyValuePair<Type, object>> GetEnumerator()
    {
        for (var slot = 0; slot < SlotCount; slot++)
        {
            if (_slots[slot] is { } feature)
            {
                yield return new(SlotType(slot), feature);
            }
        }
        if (_extra is { } extra)
        {
            foreach (var entry in extra)
            {
                yield return entry;
            }
        }
    }

    IEnumerator IEnumerable.GetEnumerator() => GetEnumerator();

    /// <summary>Back to the server's features only (the app's additions and replacements go).</summary>
    private void ResetFeatureCollection()
    {
        _revision++;
        _extra?.Clear();
        for (var slot = 0; slot < SlotCount; slot++)
        {
            _slots[slot] = DefaultSlot(slot);
        }
    }

    private object? DefaultSlot(int slot) => slot switch
    {
        // gRPC uses IHttpResetFeature to end calls with a specific RST_STREAM code (RFC 9113 §6.4).
        ResetSlot => IsHttp2 ? this : null,
        TlsConnectionSlot or TlsHandshakeSlot => _tls,
        _ => this,
    };

    private static int SlotOf(Type key)
    {
        if (key == typeof(IHttpRequestFeature)) return RequestSlot;
        if (key == typeof(IHttpResponseFeature)) return ResponseSlot;
        if (key == typeof(IHttpResponseBodyFeature)) return ResponseBodySlot;
        if (key == typeof(IHttpRequestLifetimeFeature)) return LifetimeSlot;
        if (key == typeof(IHttpConnectionFeature)) return ConnectionSlot;
        if (key == typeof(IHttpRequestIdentifierFeature)) return IdentifierSlot;
        if (key == typeof(IRequestBodyPipeFeature)) return BodyPipeSlot;
        if (key == typeof(IHttpRequestBodyDetectionFeature)) return BodyDetectionSlot;
        if (key == typeof(IHttpMaxRequestBodySizeFeature)) return MaxBodySizeSlot;
        if (key == typeof(IHttpRequestTrailersFeature)) return RequestTrailersSlot;
        if (key == typeof(IHttpResponseTrailersFeature)) return ResponseTrailersSlot;
        if (key == typeof(IHttpUpgradeFeature)) return UpgradeSlot;
        if (key == typeof(IHttpResetFeature)) return ResetSlot;
        if (key == typeof(ITlsConnectionFeature)) return TlsConnectionSlot;
        if (key == typeof(ITlsHandshakeFeature)) return TlsHandshakeSlot;
        return -1;
    }

    private static Type SlotType(int slot) => slot switch
    {
        RequestSlot => typeof(IHttpRequestFeature),
        BodyDetectionSlot => typeof(IHttpRequestBodyDetectionFeature),
        BodyPipeSlot => typeof(IRequestBodyPipeFeature),
        MaxBodySizeSlot => typeof(IHttpMaxRequestBodySizeFeature),
        RequestTrailersSlot => typeof(IHttpRequestTrailersFeature),
        LifetimeSlot => typeof(IHttpRequestLifetimeFeature),
        ConnectionSlot => typeof(IHttpConnectionFeature),
        UpgradeSlot => typeof(IHttpUpgradeFeature),
        IdentifierSlot => typeof(IHttpRequestIdentifierFeature),
        ResponseSlot => typeof(IHttpResponseFeature),
        ResponseBodySlot => typeof(IHttpResponseBodyFeature),
        ResponseTrailersSlot => typeof(IHttpResponseTrailersFeature),
        ResetSlot => typeof(IHttpResetFeature),
        TlsConnectionSlot => typeof(ITlsConnectionFeature),
        _ => typeof(ITlsHandshakeFeature),
    };
}

/// <summary>
/// <see cref="RequestFeatures"/> that also keeps the host's per-request context (IHostContextContainer):
/// ASP.NET Core's hosting layer then reuses its context and DefaultHttpContext for the next request on the
/// same object (an HTTP/1.1 connection) instead of allocating new ones.
/// </summary>
// Owned like RequestFeatures: the app's request flow.
internal sealed class HostedRequestFeatures<TContext>(HttpExchange exchange, ProxyServerOptions options, Internal.DateHeaderCache dateCache)
    : RequestFeatures(exchange, options, dateCache), IHostContextContainer<TContext>
    where TContext : notnull
{
    public TContext? HostContext { get; set; }
}
