using System.Diagnostics;
using System.Diagnostics.Metrics;
using Microsoft.Extensions.DependencyInjection;
using Proxy.Protocols;

namespace Proxy.Relay.Direct;

/// <summary>
/// ASP.NET Core's <c>http.server.request.duration</c> (meter <c>Microsoft.AspNetCore.Hosting</c>), recorded for the
/// requests the direct path serves, which never reach the hosting layer that records it for the others. The same
/// instrument, not one of the same name: a dashboard or an alert on it sees every request the server answered, whichever
/// path took it, with the tags the hosting layer gives (<c>url.scheme</c>, <c>http.request.method</c>,
/// <c>network.protocol.version</c>, <c>http.response.status_code</c>, <c>http.route</c>).
/// </summary>
/// <remarks>
/// NOTE: found rather than created: the hosting layer's instrument is the one in the app's <see cref="IMeterFactory"/>
/// scope, named and typed as below. Creating one with the same name would depend on repeating its description and unit
/// word for word; a differing one would be a second instrument that exporters report twice or drop. When the hosting
/// layer has none (metrics off), nothing is recorded, as on the pipeline.
/// </remarks>
// Immutable; Record runs on any thread.
internal sealed class ServerRequestDuration
{
    internal const string MeterName = "Microsoft.AspNetCore.Hosting";
    internal const string InstrumentName = "http.server.request.duration";

    private static readonly object[] s_statusCodes = Enumerable.Range(0, 600).Select(static code => (object)code).ToArray();

    private readonly Histogram<double>? _histogram;

    private ServerRequestDuration(Histogram<double>? histogram) => _histogram = histogram;

    /// <summary>The app's hosting instrument, or one that records nothing when the app has none.</summary>
    public static ServerRequestDuration Find(IServiceProvider services)
    {
        var factory = services.GetService<IMeterFactory>();
        if (factory is null)
        {
            return new ServerRequestDuration(null);
        }

        Histogram<double>? found = null;
        // Start publishes every instrument that exists; none is enabled, so this listener never sees a measurement.
        using (var listener = new MeterListener())
        {
            listener.InstrumentPublished = (instrument, _) =>
            {
                if (found is null && instrument is Histogram<double> histogram && instrument.Name == InstrumentName
                    && instrument.Meter.Name == MeterName && ReferenceEquals(instrument.Meter.Scope, factory))
                {
                    found = histogram;
                }
            };
            listener.Start();
        }

        return new ServerRequestDuration(found);
    }

    /// <summary>True when something listens to the instrument: only then is a direct request timed for it.</summary>
    public bool Enabled => _histogram is { Enabled: true };

    /// <summary>Records one request with the hosting layer's tags.</summary>
    public void Record(HttpExchange exchange, string? httpRoute, TimeSpan duration)
    {
        if (_histogram is not { Enabled: true } histogram)
        {
            return;
        }

        var tags = new TagList
        {
            { "url.scheme", exchange.Scheme },
            { "http.request.method", KnownMethod(exchange.Method) },
            { "network.protocol.version", ProtocolVersion(exchange.Protocol) },
            { "http.response.status_code", (uint)exchange.StatusCode < (uint)s_statusCodes.Length ? s_statusCodes[exchange.StatusCode] : exchange.StatusCode },
        };
        if (httpRoute is not null)
        {
            tags.Add("http.route", httpRoute);
        }

        histogram.Record(duration.TotalSeconds, tags);
    }

    /// <summary>The method as the hosting layer tags it: the standard ones as they are, any other as "_OTHER".</summary>
    internal static string KnownMethod(string method) => method switch
    {
        "GET" or "POST" or "PUT" or "DELETE" or "HEAD" or "OPTIONS" or "PATCH" or "TRACE" or "CONNECT" => method,
        _ => "_OTHER",
    };

    /// <summary>"HTTP/2" -> "2", "HTTP/1.1" -> "1.1" (the hosting layer's network.protocol.version).</summary>
    internal static string ProtocolVersion(string protocol) => protocol switch
    {
        "HTTP/2" => "2",
        "HTTP/1.1" => "1.1",
        "HTTP/1.0" => "1.0",
        _ => protocol.StartsWith("HTTP/", StringComparison.Ordinal) ? protocol[5..] : protocol,
    };
}
