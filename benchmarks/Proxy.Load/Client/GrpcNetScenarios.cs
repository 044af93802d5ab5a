using System.Diagnostics;
using System.Net.Security;
using Google.Protobuf;
using Grpc.Core;
using Grpc.Net.Client;
using Proxy.Load.Protos;

namespace Proxy.Load.Client;

/// <summary>
/// One connection of the Grpc.Net.Client scenarios, as crank's gRPC client builds it: a <see cref="GrpcChannel"/>
/// over its own <see cref="SocketsHttpHandler"/>, so C connections are C HTTP/2 connections and the S workers of one
/// connection multiplex on it. Certificates are not verified (targets use self-signed ones).
/// </summary>
// Owned by the runner (one per connection); the S workers of the connection share the client, which is thread-safe.
public sealed class GrpcNetConnection : IDisposable
{
    private readonly SocketsHttpHandler _handler;

    public GrpcNetConnection(Uri address)
    {
        _handler = new SocketsHttpHandler
        {
            UseProxy = false,
            AllowAutoRedirect = false,
            // Connections x streams is what goes on the wire: never a second HTTP/2 connection behind the handler's
            // back (no shape here opens more than the servers' 100 streams per connection).
            EnableMultipleHttp2Connections = false,
            PooledConnectionLifetime = Timeout.InfiniteTimeSpan,
            PooledConnectionIdleTimeout = TimeSpan.FromMinutes(5),
            // No traceparent header on every call: work the target would not see from crank's client either.
            ActivityHeadersPropagator = null,
            SslOptions = new SslClientAuthenticationOptions { RemoteCertificateValidationCallback = static (_, _, _, _) => true },
        };

        // http:// is h2c with prior knowledge, https:// is h2 through ALPN: Grpc.Net.Client asks for HTTP/2 exactly.
        Channel = GrpcChannel.ForAddress(address, new GrpcChannelOptions
        {
            HttpHandler = _handler,
            MaxReceiveMessageSize = null,
            MaxSendMessageSize = null,
        });
        Client = new BenchmarkService.BenchmarkServiceClient(Channel);
    }

    public GrpcChannel Channel { get; }

    public BenchmarkService.BenchmarkServiceClient Client { get; }

    public void Dispose()
    {
        Channel.Dispose();
        _handler.Dispose();
    }
}

/// <summary>
/// What the three Grpc.Net.Client scenarios share: the connection and the request message, built once (sending a
/// message only reads it) with <see cref="LoadOptions.GrpcRequestSize"/> payload bytes and
/// <see cref="LoadOptions.GrpcResponseSize"/> as its response_size.
/// </summary>
public abstract class GrpcNetScenario(LoadOptions options) : Scenario<GrpcNetConnection>(options)
{
    protected SimpleRequest Request { get; } = new()
    {
        ResponseSize = options.GrpcResponseSize,
        Payload = ByteString.CopyFrom(new byte[options.GrpcRequestSize]),
    };

    protected sealed override GrpcNetConnection Open() => new(Options.Url);

    /// <summary>A response counts when its payload is the size asked for; its bytes as they were on the wire.</summary>
    protected bool CheckResponse(SimpleResponse response, WorkerStats stats, RunState state, out long bytes)
    {
        // The message plus the 5-octet Length-Prefixed-Message header (gRPC over HTTP/2).
        bytes = response.CalculateSize() + 5;
        if (response.Payload.Length != Options.GrpcResponseSize)
        {
            stats.BadResponse(state, $"a response of {response.Payload.Length} payload bytes, {Options.GrpcResponseSize} asked for");
            return false;
        }

        return true;
    }

    /// <summary>A call that failed: a bad response when the server gave a status, a failure otherwise.</summary>
    protected static void CallFailed(Exception exception, WorkerStats stats, RunState state)
    {
        if (exception is RpcException { StatusCode: not StatusCode.Unavailable and not StatusCode.Internal } rpc)
        {
            stats.BadResponse(state, $"grpc-status {(int)rpc.StatusCode} ({rpc.StatusCode}): {rpc.Status.Detail}");
        }
        else
        {
            stats.Failed(state, exception);
        }
    }
}

/// <summary>
/// grpcnet-unary: <c>UnaryCallAsync</c> in a loop, one call in flight per worker; latency from the call to its
/// response. The call in flight when the run ends is not cancelled: the loop ends after it (as crank's client).
/// </summary>
public sealed class GrpcNetUnaryScenario(LoadOptions options) : GrpcNetScenario(options)
{
    public override async Task RunStreamAsync(GrpcNetConnection connection, WorkerStats stats, RunState state)
    {
        var client = connection.Client;
        var stopping = state.Stopping;
        while (!stopping.IsCancellationRequested)
        {
            var start = Stopwatch.GetTimestamp();
            try
            {
                var response = await client.UnaryCallAsync(Request);
                if (CheckResponse(response, stats, state, out var bytes))
                {
                    stats.Completed(state, start, bytes);
                }
            }
            catch (Exception ex)
            {
                CallFailed(ex, stats, state);
            }
        }
    }
}

/// <summary>
/// grpcnet-serverstreaming: one <c>StreamingFromServer</c> call per worker, held for the whole run; every response
/// message is a request, its latency the time since the previous one. The run's end cancels the call (RST_STREAM),
/// the only way such a call ends.
/// </summary>
public sealed class GrpcNetServerStreamingScenario(LoadOptions options) : GrpcNetScenario(options)
{
    public override async Task RunStreamAsync(GrpcNetConnection connection, WorkerStats stats, RunState state)
    {
        var client = connection.Client;
        var stopping = state.Stopping;
        while (!stopping.IsCancellationRequested)
        {
            try
            {
                using var call = client.StreamingFromServer(Request, cancellationToken: stopping);
                var responses = call.ResponseStream;
                var last = Stopwatch.GetTimestamp();
                while (await responses.MoveNext(stopping))
                {
                    if (CheckResponse(responses.Current, stats, state, out var bytes))
                    {
                        stats.Completed(state, last, bytes);
                    }

                    last = Stopwatch.GetTimestamp();
                }

                stats.BadResponse(state, $"the server ended a StreamingFromServer call (grpc-status {(int)call.GetStatus().StatusCode})");
            }
            catch (Exception) when (IsStopping(state))
            {
                return;
            }
            catch (Exception ex)
            {
                CallFailed(ex, stats, state);
            }
        }
    }
}

/// <summary>
/// grpcnet-pingpong: one <c>StreamingCall</c> per worker for the whole run; a request is one message written and
/// its reply read. When the run ends the worker finishes its round trip, completes the request stream and
/// expects the call to end with OK (as crank's client; no reset). A broken call is counted and replaced.
/// </summary>
public sealed class GrpcNetPingPongScenario(LoadOptions options) : GrpcNetScenario(options)
{
    public override async Task RunStreamAsync(GrpcNetConnection connection, WorkerStats stats, RunState state)
    {
        var client = connection.Client;
        var stopping = state.Stopping;
        while (!stopping.IsCancellationRequested)
        {
            try
            {
                using var call = client.StreamingCall();
                var responses = call.ResponseStream;
                var ended = false;
                while (!stopping.IsCancellationRequested)
                {
                    var start = Stopwatch.GetTimestamp();
                    await call.RequestStream.WriteAsync(Request);
                    if (!await responses.MoveNext())
                    {
                        stats.BadResponse(state, $"the server ended a StreamingCall (grpc-status {(int)call.GetStatus().StatusCode})");
                        ended = true;
                        break;
                    }

                    if (CheckResponse(responses.Current, stats, state, out var bytes))
                    {
                        stats.Completed(state, start, bytes);
                    }
                }

                if (!ended)
                {
                    await call.RequestStream.CompleteAsync();
                    if (await responses.MoveNext())
                    {
                        stats.BadResponse(state, "a StreamingCall reply with no request");
                    }
                }
            }
            catch (Exception ex)
            {
                CallFailed(ex, stats, state);
            }
        }
    }
}
