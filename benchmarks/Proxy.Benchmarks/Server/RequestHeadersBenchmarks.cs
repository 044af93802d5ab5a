using BenchmarkDotNet.Attributes;
using Microsoft.AspNetCore.Http;
using Microsoft.Extensions.Primitives;
using Proxy.Protocols;
using Proxy.Server.Features;

namespace Proxy.Benchmarks.Server;

/// <summary>
/// What the forwarder asks of a gRPC call's request headers (<see cref="GrpcHeaders.Request"/>'s fields, :authority as
/// Host): Count, two enumerations, ContentLength and 20 lookups, most of names the request does not carry. `Fields`:
/// <see cref="RequestHeaders"/> reading the decoded field list; `Dictionary`: a HeaderDictionary filled per request as the
/// server did before session 12.
/// </summary>
[MemoryDiagnoser]
public class RequestHeadersBenchmarks
{
    private static readonly string[] Lookups =
    [
        "Content-Type", "Content-Type", "TE", "grpc-timeout", "Transfer-Encoding", "Connection", "Upgrade", "Expect", "Host", "Host",
        "Content-Length", "X-Forwarded-For", "X-Forwarded-Proto", "X-Forwarded-Host", "X-Forwarded-Prefix", "traceparent", "Cookie",
        "Content-Type", "Keep-Alive", "Proxy-Connection",
    ];

    private readonly FieldsExchange _exchange = new() { Connection = new ConnectionMetadata { ConnectionId = "bench" } };
    private readonly RequestHeaders _fields = new();
    private readonly HeaderDictionary _dictionary = new();

    [GlobalSetup]
    public void Setup()
    {
        foreach (var field in GrpcHeaders.Request)
        {
            if (field.Key[0] != ':')
            {
                _exchange.RequestHeaders.Add(field);
            }
        }
    }

    [Benchmark(Baseline = true)]
    public long Dictionary()
    {
        _dictionary.Clear();
        foreach (var (name, value) in _exchange.RequestHeaders)
        {
            _dictionary[name] = _dictionary.TryGetValue(name, out var existing) ? StringValues.Concat(existing, value) : value;
        }
        if (!_dictionary.ContainsKey("Host"))
        {
            _dictionary["Host"] = _exchange.Authority;
        }
        return Use(_dictionary);
    }

    [Benchmark]
    public long Fields()
    {
        _fields.Reset(_exchange);
        return Use(_fields);
    }

    private static long Use(IHeaderDictionary headers)
    {
        long n = headers.Count;
        foreach (var pair in headers)
        {
            n += pair.Value.Count;
        }
        foreach (var pair in headers)
        {
            n += pair.Key.Length;
        }
        foreach (var name in Lookups)
        {
            n += headers[name].Count;
        }
        return n + (headers.ContentLength ?? 0);
    }

    private sealed class FieldsExchange : HttpExchange
    {
        public FieldsExchange() => Authority = "backend.example.com:5001";
        public override PipeReader RequestBody => PipeReader.Create(Stream.Null);
        public override CancellationToken RequestAborted => default;
        public override bool SupportsTrailers => true;
        public override bool HasResponseStarted => false;
        public override ValueTask StartResponseAsync(CancellationToken cancellationToken = default) => default;
        public override PipeWriter ResponseBody => PipeWriter.Create(Stream.Null);
        public override ValueTask CompleteAsync() => default;
        public override void Abort(uint errorCode) { }
    }
}
