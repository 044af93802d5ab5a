using System.Diagnostics;
using System.Net;
using Google.Protobuf;
using Proxy.Load.Protos;

namespace Proxy.Load.Client;

/// <summary>What the three gRPC scenarios share: the request message, framed once.</summary>
public abstract class GrpcScenario : Scenario
{
    protected GrpcScenario(LoadOptions options, string method) : base(options)
    {
        MethodUri = new Uri(options.Url, $"/grpc.testing.BenchmarkService/{method}");
        RequestFrame = GrpcWire.Frame(new SimpleRequest
        {
            ResponseSize = options.Payload,
            Payload = ByteString.CopyFrom(new byte[options.Payload]),
        });
    }

    protected Uri MethodUri { get; }

    protected byte[] RequestFrame { get; }

    protected static bool CheckResponse(HttpResponseMessage response, WorkerStats stats, RunState state)
    {
        if (response.StatusCode != HttpStatusCode.OK)
        {
            stats.BadResponse(state, $"HTTP {(int)response.StatusCode} (grpc-status {GrpcWire.Status(response) ?? "none"})");
            return false;
        }

        return true;
    }
}

/// <summary>grpc-unary: one call per request; latency from send to trailers read.</summary>
public sealed class GrpcUnaryScenario(LoadOptions options) : GrpcScenario(options, "UnaryCall")
{
    public override async Task RunStreamAsync(HttpMessageInvoker connection, WorkerStats stats, RunState state)
    {
        using var reader = new GrpcMessageReader();
        var stopping = state.Stopping;
        while (!stopping.IsCancellationRequested)
        {
            var start = Stopwatch.GetTimestamp();
            try
            {
                using var request = GrpcWire.CreateCall(MethodUri, new FramedContent(RequestFrame));
                using var response = await connection.SendAsync(request, stopping);
                if (!CheckResponse(response, stats, state))
                {
                    continue;
                }

                reader.Reset(await response.Content.ReadAsStreamAsync(stopping));
                long bytes = 0;
                var messages = 0;
                for (int length; (length = await reader.ReadMessageAsync(stopping)) >= 0; messages++)
                {
                    bytes += length + GrpcWire.MessageHeaderSize;
                }

                // Trailers are there once the body was read to its end.
                var status = GrpcWire.Status(response);
                if (status != "0" || messages != 1)
                {
                    stats.BadResponse(state, $"grpc-status {status ?? "none"}, {messages} message(s)");
                    continue;
                }

                stats.Completed(state, start, bytes);
            }
            catch (Exception) when (IsStopping(state))
            {
                return;
            }
            catch (Exception ex)
            {
                stats.Failed(state, ex);
            }
        }
    }
}

/// <summary>
/// grpc-server-streaming: one long call per stream; every response message is a request, its latency the
/// time since the previous one. The call is cancelled (RST_STREAM) when the run ends.
/// </summary>
public sealed class GrpcServerStreamingScenario(LoadOptions options) : GrpcScenario(options, "StreamingFromServer")
{
    public override async Task RunStreamAsync(HttpMessageInvoker connection, WorkerStats stats, RunState state)
    {
        using var reader = new GrpcMessageReader();
        var stopping = state.Stopping;
        while (!stopping.IsCancellationRequested)
        {
            try
            {
                using var request = GrpcWire.CreateCall(MethodUri, new FramedContent(RequestFrame));
                using var response = await connection.SendAsync(request, stopping);
                if (!CheckResponse(response, stats, state))
                {
                    continue;
                }

                reader.Reset(await response.Content.ReadAsStreamAsync(stopping));
                var last = Stopwatch.GetTimestamp();
                while (true)
                {
                    var length = await reader.ReadMessageAsync(stopping);
                    if (length < 0)
                    {
                        stats.BadResponse(state, $"The server ended a StreamingFromServer call (grpc-status {GrpcWire.Status(response) ?? "none"}).");
                        break;
                    }

                    stats.Completed(state, last, length + GrpcWire.MessageHeaderSize);
                    last = Stopwatch.GetTimestamp();
                }
            }
            catch (Exception) when (IsStopping(state))
            {
                return;
            }
            catch (Exception ex)
            {
                stats.Failed(state, ex);
            }
        }
    }
}

/// <summary>
/// grpc-streaming: ping-pong on one long duplex call per stream; a request is one message out and its reply
/// back. The call is cancelled (RST_STREAM) when the run ends.
/// </summary>
public sealed class GrpcPingPongScenario(LoadOptions options) : GrpcScenario(options, "StreamingCall")
{
    public override async Task RunStreamAsync(HttpMessageInvoker connection, WorkerStats stats, RunState state)
    {
        using var reader = new GrpcMessageReader();
        var stopping = state.Stopping;
        while (!stopping.IsCancellationRequested)
        {
            try
            {
                using var content = new DuplexContent();
                using var request = GrpcWire.CreateCall(MethodUri, content);
                // SendAsync completes with the response headers, which the server sends with its first reply:
                // so the first message must go out before awaiting it.
                var responseTask = connection.SendAsync(request, stopping);
                if (await Task.WhenAny(content.RequestStream, responseTask).WaitAsync(stopping) == responseTask)
                {
                    // Answered (or failed) before the body even started: an error status, or a connection failure.
                    using var early = await responseTask;
                    stats.BadResponse(state, $"HTTP {(int)early.StatusCode} before the request body (grpc-status {GrpcWire.Status(early) ?? "none"})");
                    continue;
                }

                var requestStream = await content.RequestStream;
                HttpResponseMessage? response = null;
                try
                {
                    while (!stopping.IsCancellationRequested)
                    {
                        var start = Stopwatch.GetTimestamp();
                        await requestStream.WriteAsync(RequestFrame, stopping);
                        await requestStream.FlushAsync(stopping);
                        if (response is null)
                        {
                            response = await responseTask;
                            if (!CheckResponse(response, stats, state))
                            {
                                break;
                            }

                            reader.Reset(await response.Content.ReadAsStreamAsync(stopping));
                        }

                        var length = await reader.ReadMessageAsync(stopping);
                        if (length < 0)
                        {
                            stats.BadResponse(state, $"The server ended a StreamingCall (grpc-status {GrpcWire.Status(response) ?? "none"}).");
                            break;
                        }

                        stats.Completed(state, start, length + GrpcWire.MessageHeaderSize);
                    }
                }
                finally
                {
                    response?.Dispose();
                }
            }
            catch (Exception) when (IsStopping(state))
            {
                return;
            }
            catch (Exception ex)
            {
                stats.Failed(state, ex);
            }
        }
    }
}
