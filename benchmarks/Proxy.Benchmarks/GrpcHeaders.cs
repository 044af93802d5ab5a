namespace Proxy.Benchmarks;

/// <summary>The header sets of a typical gRPC unary call, as grpc-dotnet sends and a server answers.</summary>
internal static class GrpcHeaders
{
    public const string Path = "/grpc.testing.BenchmarkService/UnaryCall";

    /// <summary>Pseudo-headers first (RFC 9113 §8.3), then the fields grpc-dotnet 2.x sends.</summary>
    public static readonly KeyValuePair<string, string>[] Request =
    [
        new(":method", "POST"),
        new(":scheme", "https"),
        new(":path", Path),
        new(":authority", "backend.example.com:5001"),
        new("content-type", "application/grpc"),
        new("te", "trailers"),
        new("grpc-timeout", "100m"),
        new("user-agent", "grpc-dotnet/2.67.0 (.NET 10.0.0; CLR 10.0.0; net10.0; linux; x64)"),
        new("grpc-accept-encoding", "identity,gzip,deflate"),
    ];

    public static readonly KeyValuePair<string, string>[] Response =
    [
        new(":status", "200"),
        new("content-type", "application/grpc"),
        new("date", "Tue, 15 Apr 2025 09:30:00 GMT"),
        new("server", "Proxy"),
        new("grpc-encoding", "identity"),
    ];

    public static readonly KeyValuePair<string, string>[] Trailers =
    [
        new("grpc-status", "0"),
        new("grpc-message", "OK"),
    ];
}
