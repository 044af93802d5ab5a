using System.Reflection;
using System.Text;
using BenchmarkDotNet.Attributes;
using Proxy.Codecs.Hpack;

namespace Proxy.Benchmarks.Hpack;

/// <summary>
/// Huffman coding (RFC 7541 §5.2, Appendix B) of strings a gRPC call carries, per string.
/// </summary>
/// <remarks>
/// NOTE: <c>Huffman</c> is internal to Proxy.Codecs and the benchmarks may not change src/, so its
/// methods are bound once through reflection into typed delegates: a delegate call is a few
/// nanoseconds, small next to coding a 16-65 character string.
/// </remarks>
// Owned by the benchmark thread.
[MemoryDiagnoser]
public class HuffmanBenchmarks
{
    private const int StringCount = 6;

    private static readonly string[] s_strings =
    [
        GrpcHeaders.Path,
        "application/grpc",
        "backend.example.com:5001",
        "grpc-dotnet/2.67.0 (.NET 10.0.0; CLR 10.0.0; net10.0; linux; x64)",
        "Tue, 15 Apr 2025 09:30:00 GMT",
        "identity,gzip,deflate",
    ];

    private delegate int EncodeChars(ReadOnlySpan<char> source, Span<byte> destination);
    private delegate int EncodedLength(ReadOnlySpan<char> source);
    private delegate int DecodeBytes(ReadOnlySpan<byte> source, Span<byte> destination);

    private readonly byte[] _encodeBuffer = new byte[256];
    private readonly byte[] _decodeBuffer = new byte[256];
    private EncodeChars _encode = null!;
    private EncodedLength _encodedLength = null!;
    private DecodeBytes _decode = null!;
    private byte[][] _encoded = [];

    [GlobalSetup]
    public void Setup()
    {
        var huffman = typeof(HpackEncoder).Assembly.GetType("Proxy.Codecs.Hpack.Huffman", throwOnError: true)!;
        _encode = Bind<EncodeChars>(huffman, "Encode", typeof(ReadOnlySpan<char>), typeof(Span<byte>));
        _encodedLength = Bind<EncodedLength>(huffman, "GetEncodedLength", typeof(ReadOnlySpan<char>));
        _decode = Bind<DecodeBytes>(huffman, "Decode", typeof(ReadOnlySpan<byte>), typeof(Span<byte>));

        _encoded = new byte[s_strings.Length][];
        for (int i = 0; i < s_strings.Length; i++)
        {
            int length = _encode(s_strings[i], _encodeBuffer);
            _encoded[i] = _encodeBuffer.AsSpan(0, length).ToArray();
            int decoded = _decode(_encoded[i], _decodeBuffer);
            if (Encoding.Latin1.GetString(_decodeBuffer, 0, decoded) != s_strings[i])
            {
                throw new InvalidOperationException($"Huffman round trip failed for '{s_strings[i]}'.");
            }
        }
    }

    /// <summary>What the encoder does per string: measure the coded length, then code it.</summary>
    [Benchmark(OperationsPerInvoke = StringCount)]
    public int Encode()
    {
        int total = 0;
        foreach (string text in s_strings)
        {
            total += _encodedLength(text);
            total += _encode(text, _encodeBuffer);
        }
        return total;
    }

    [Benchmark(OperationsPerInvoke = StringCount)]
    public int Decode()
    {
        int total = 0;
        foreach (byte[] encoded in _encoded)
        {
            total += _decode(encoded, _decodeBuffer);
        }
        return total;
    }

    private static T Bind<T>(Type type, string name, params Type[] parameters) where T : Delegate
    {
        var method = type.GetMethod(name, BindingFlags.Public | BindingFlags.NonPublic | BindingFlags.Static, parameters)
            ?? throw new MissingMethodException(type.FullName, name);
        return method.CreateDelegate<T>();
    }
}
