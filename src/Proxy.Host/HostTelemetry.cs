using OpenTelemetry.Exporter;
using OpenTelemetry.Metrics;
using OpenTelemetry.Resources;
using OpenTelemetry.Trace;

namespace Proxy.Host;

/// <summary>
/// Metrics and traces, configured rather than coded: a Prometheus reader for the admin endpoint's /metrics, and OTLP
/// export when <c>OpenTelemetry:Otlp:Endpoint</c> (or the standard OTEL_EXPORTER_OTLP_ENDPOINT) is set. Neither:
/// no OpenTelemetry SDK in the process at all.
/// </summary>
internal static class HostTelemetry
{
    /// <summary>Our meters (server and forwarding), ASP.NET Core's request and Kestrel meters; the runtime's come from its instrumentation.</summary>
    public static readonly string[] Meters = ["Proxy.Server", "Proxy.Forwarding", "Microsoft.AspNetCore.Hosting", "Microsoft.AspNetCore.Server.Kestrel"];

    /// <summary>The forwarder's spans and ASP.NET Core's request spans.</summary>
    public static readonly string[] ActivitySources = ["Proxy.Forwarding", "Microsoft.AspNetCore"];

    public const string EndpointKey = "OpenTelemetry:Otlp:Endpoint";
    public const string ProtocolKey = "OpenTelemetry:Otlp:Protocol";
    public const string ServiceNameKey = "OpenTelemetry:ServiceName";

    /// <summary>The standard variable; the OTLP exporter reads it (and its siblings) itself.</summary>
    public const string StandardEndpointVariable = "OTEL_EXPORTER_OTLP_ENDPOINT";

    public static void Add(WebApplicationBuilder builder, bool prometheus)
    {
        var configuration = builder.Configuration;
        var endpoint = configuration[EndpointKey];
        var otlp = !string.IsNullOrWhiteSpace(endpoint) || !string.IsNullOrWhiteSpace(configuration[StandardEndpointVariable]);
        if (!prometheus && !otlp)
        {
            return;
        }

        if (!string.IsNullOrWhiteSpace(endpoint) && !Uri.TryCreate(endpoint, UriKind.Absolute, out _))
        {
            throw new HostStartupException($"{EndpointKey} '{endpoint}' is not an absolute URL (e.g. http://127.0.0.1:4317).");
        }

        var protocol = ReadProtocol(configuration);
        var telemetry = builder.Services.AddOpenTelemetry()
            .ConfigureResource(resource => resource.AddService(configuration[ServiceNameKey] is { Length: > 0 } name ? name : "proxy"));
        telemetry.WithMetrics(metrics =>
        {
            metrics.AddMeter(Meters).AddRuntimeInstrumentation();
            if (prometheus)
            {
                metrics.AddPrometheusExporter();
            }

            if (otlp)
            {
                metrics.AddOtlpExporter(o => Configure(o, endpoint, protocol, "v1/metrics"));
            }
        });
        if (otlp)
        {
            telemetry.WithTracing(tracing => tracing.AddSource(ActivitySources).AddOtlpExporter(o => Configure(o, endpoint, protocol, "v1/traces")));
        }
    }

    private static OtlpExportProtocol? ReadProtocol(IConfiguration configuration) => configuration[ProtocolKey]?.Trim().ToLowerInvariant() switch
    {
        null or "" => null, // the exporter's default, or OTEL_EXPORTER_OTLP_PROTOCOL
        "grpc" => OtlpExportProtocol.Grpc,
        "http/protobuf" => OtlpExportProtocol.HttpProtobuf,
        var other => throw new HostStartupException($"{ProtocolKey} is '{other}': use 'grpc' or 'http/protobuf'."),
    };

    /// <summary>
    /// Our key, when set, wins over the standard variable. Over http/protobuf the signal's path is appended to a base
    /// endpoint, as the exporter does for OTEL_EXPORTER_OTLP_ENDPOINT (and does not for an endpoint set in code).
    /// </summary>
    private static void Configure(OtlpExporterOptions options, string? endpoint, OtlpExportProtocol? protocol, string signalPath)
    {
        if (protocol is { } p)
        {
            options.Protocol = p;
        }

        if (string.IsNullOrWhiteSpace(endpoint))
        {
            return;
        }

        var uri = new Uri(endpoint); // checked in Add
        if (options.Protocol == OtlpExportProtocol.HttpProtobuf && !uri.AbsolutePath.EndsWith(signalPath, StringComparison.Ordinal))
        {
            uri = new Uri(uri.ToString().TrimEnd('/') + "/" + signalPath);
        }

        options.Endpoint = uri;
    }
}
