using BenchmarkDotNet.Attributes;
using Proxy.Codecs.Hpack;

namespace Proxy.Benchmarks.Hpack;

/// <summary>
/// HPACK encode and decode of one gRPC header block. "Cold" is the first block on a connection: a new
/// encoder or decoder (its construction is included, as on a real new connection) and an empty dynamic
/// table, so fields go out as literals with incremental indexing. "Warm" is the steady state: the same
/// fields are already in the dynamic table and every field is a one-octet index.
/// </summary>
// Owned by the benchmark thread.
[MemoryDiagnoser]
public class HpackBenchmarks
{
    private readonly ArrayBufferWriter<byte> _output = new(1024);
    private readonly CountingHeaderHandler _handler = new();
    private KeyValuePair<string, string>[] _fields = [];
    private HpackEncoder _warmEncoder = null!;
    private HpackDecoder _warmDecoder = null!;
    private byte[] _coldBlock = [];
    private byte[] _warmBlock = [];

    [Params("Request", "Response", "Trailers")]
    public string HeaderSet { get; set; } = "Request";

    [GlobalSetup]
    public void Setup()
    {
        _fields = HeaderSet switch
        {
            "Request" => GrpcHeaders.Request,
            "Response" => GrpcHeaders.Response,
            "Trailers" => GrpcHeaders.Trailers,
            _ => throw new ArgumentException(HeaderSet),
        };

        _warmEncoder = new HpackEncoder();
        _coldBlock = EncodeWith(_warmEncoder);
        _warmBlock = EncodeWith(_warmEncoder);
        if (_warmBlock.Length != _fields.Length)
        {
            // Every field must be a one-octet index once the table is warm, or "warm" measures something else.
            throw new InvalidOperationException($"Warm {HeaderSet} block is {_warmBlock.Length} octets for {_fields.Length} fields.");
        }

        _warmDecoder = new HpackDecoder();
        _warmDecoder.Decode(_coldBlock, _handler);
        _handler.Reset();
        _warmDecoder.Decode(_warmBlock, _handler);
        if (_handler.Count != _fields.Length)
        {
            throw new InvalidOperationException("The warm block did not decode to the same fields.");
        }
    }

    [Benchmark]
    public int Encode_ColdTable()
    {
        var encoder = new HpackEncoder();
        return Encode(encoder);
    }

    [Benchmark]
    public int Encode_WarmTable() => Encode(_warmEncoder);

    [Benchmark]
    public int Decode_ColdTable()
    {
        var decoder = new HpackDecoder();
        _handler.Reset();
        decoder.Decode(_coldBlock, _handler);
        return _handler.Count;
    }

    [Benchmark]
    public int Decode_WarmTable()
    {
        _handler.Reset();
        _warmDecoder.Decode(_warmBlock, _handler);
        return _handler.Count;
    }

    private int Encode(HpackEncoder encoder)
    {
        _output.ResetWrittenCount();
        encoder.BeginHeaderBlock(_output);
        foreach (var (name, value) in _fields)
        {
            encoder.EncodeHeader(_output, name, value);
        }
        return _output.WrittenCount;
    }

    private byte[] EncodeWith(HpackEncoder encoder)
    {
        Encode(encoder);
        return _output.WrittenSpan.ToArray();
    }
}

/// <summary>A header sink that only counts, so decoding is what gets measured.</summary>
// Owned by the benchmark thread.
internal sealed class CountingHeaderHandler : IHpackHeaderHandler
{
    public int Count { get; private set; }
    public int Octets { get; private set; }

    public void Reset()
    {
        Count = 0;
        Octets = 0;
    }

    public void OnHeader(ReadOnlySpan<byte> name, ReadOnlySpan<byte> value)
    {
        Count++;
        Octets += name.Length + value.Length;
    }
}
