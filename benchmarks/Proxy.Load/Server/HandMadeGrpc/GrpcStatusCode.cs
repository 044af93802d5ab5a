namespace Proxy.Load.Server.HandMadeGrpc;

/// <summary>gRPC status codes (grpc/grpc doc/statuscodes.md), carried in the grpc-status trailer.</summary>
public enum GrpcStatusCode
{
    OK = 0,
    Cancelled = 1,
    Unknown = 2,
    InvalidArgument = 3,
    DeadlineExceeded = 4,
    NotFound = 5,
    AlreadyExists = 6,
    PermissionDenied = 7,
    ResourceExhausted = 8,
    FailedPrecondition = 9,
    Aborted = 10,
    OutOfRange = 11,
    Unimplemented = 12,
    Internal = 13,
    Unavailable = 14,
    DataLoss = 15,
    Unauthenticated = 16,
}

/// <summary>Thrown by a handler (or the framing layer) to end a call with a status other than OK.</summary>
public sealed class GrpcStatusException(GrpcStatusCode status, string message) : Exception(message)
{
    public GrpcStatusCode Status { get; } = status;
}
