using System.Text;
using BenchmarkDotNet.Attributes;
using Proxy.Codecs.Http1;

namespace Proxy.Benchmarks.Http1;

/// <summary>HTTP/1.1 request-head parsing (RFC 9112 §2-§5) of a browser-like GET and an API POST head.</summary>
// Owned by the benchmark thread.
[MemoryDiagnoser]
public class Http1ParserBenchmarks
{
    private const string Get =
        "GET /api/items/42?fields=name,price&lang=en HTTP/1.1\r\n" +
        "Host: www.example.com\r\n" +
        "User-Agent: Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0 Safari/537.36\r\n" +
        "Accept: text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8\r\n" +
        "Accept-Encoding: gzip, deflate, br\r\n" +
        "Accept-Language: en-US,en;q=0.9\r\n" +
        "Cookie: session=4f2a9c1e7b; theme=dark\r\n" +
        "Connection: keep-alive\r\n" +
        "\r\n";

    private const string Post =
        "POST /api/orders HTTP/1.1\r\n" +
        "Host: api.example.com\r\n" +
        "User-Agent: curl/8.5.0\r\n" +
        "Accept: application/json\r\n" +
        "Content-Type: application/json; charset=utf-8\r\n" +
        "Content-Length: 348\r\n" +
        "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NSJ9.c2lnbmF0dXJl\r\n" +
        "\r\n";

    private readonly CountingSink _sink = new();
    private ReadOnlySequence<byte> _get;
    private ReadOnlySequence<byte> _post;

    [GlobalSetup]
    public void Setup()
    {
        _get = new ReadOnlySequence<byte>(Encoding.ASCII.GetBytes(Get));
        _post = new ReadOnlySequence<byte>(Encoding.ASCII.GetBytes(Post));
        if (ParseGet() != 7 || ParsePost() != 6)
        {
            throw new InvalidOperationException("The request heads did not parse to the expected field counts.");
        }
    }

    [Benchmark]
    public int ParseGet() => Parse(_get);

    [Benchmark]
    public int ParsePost() => Parse(_post);

    private int Parse(in ReadOnlySequence<byte> buffer)
    {
        _sink.Count = 0;
        if (!Http1RequestParser.TryParseHead(buffer, _sink, Http1ParserLimits.Default, out var head, out _))
        {
            throw new InvalidOperationException("Incomplete head.");
        }
        return head.HeadLength > 0 ? _sink.Count : -1;
    }

    /// <summary>Counts fields and touches the spans, so parsing is what gets measured.</summary>
    // Owned by the benchmark thread.
    private sealed class CountingSink : IHttp1RequestSink
    {
        public int Count;
        public int Octets;

        public void OnRequestLine(ReadOnlySpan<byte> method, ReadOnlySpan<byte> target, Http1Version version, Http1TargetForm form)
            => Octets += method.Length + target.Length;

        public void OnField(ReadOnlySpan<byte> name, ReadOnlySpan<byte> value)
        {
            Count++;
            Octets += name.Length + value.Length;
        }
    }
}
