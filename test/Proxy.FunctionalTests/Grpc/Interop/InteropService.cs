using System.Collections.Concurrent;
using System.Security.Cryptography;
using Google.Protobuf;
using Grpc.Core;

namespace Proxy.FunctionalTests.Grpc.Interop;

/// <summary>
/// The service of interop.proto on Grpc.AspNetCore, and what it saw of the calls a client cannot see the end of
/// (how a Sleep call ended, how many Hold calls were in flight together).
/// </summary>
// One instance per host (a DI singleton), shared by its calls; every member is thread-safe.
public sealed class InteropService : Interop.InteropBase
{
    /// <summary>Request headers with this prefix come back as response headers (text or <c>-bin</c>).</summary>
    public const string InitialEchoPrefix = "x-echo-initial";

    /// <summary>Request headers with this prefix come back as trailers (text or <c>-bin</c>).</summary>
    public const string TrailingEchoPrefix = "x-echo-trailing";

    private readonly ConcurrentDictionary<string, TaskCompletionSource<SleepOutcome>> _sleeps = new();
    private readonly ConcurrentDictionary<string, HoldGroup> _holds = new();

    /// <summary>
    /// What the server saw of a Sleep call that its token ended: the time its deadline (grpc-timeout) left when the
    /// handler started, null without one.
    /// </summary>
    public sealed record SleepOutcome(TimeSpan? TimeLeftAtStart);

    /// <summary>Completes when the handler of the Sleep call <paramref name="callId"/> was cancelled.</summary>
    public Task<SleepOutcome> SleepEndedAsync(string callId) => SleepSlot(callId).Task;

    private TaskCompletionSource<SleepOutcome> SleepSlot(string callId) =>
        _sleeps.GetOrAdd(callId, _ => new TaskCompletionSource<SleepOutcome>(TaskCreationOptions.RunContinuationsAsynchronously));

    public override Task<Nothing> Empty(Nothing request, ServerCallContext context) => Task.FromResult(new Nothing());

    public override async Task<UnaryReply> Unary(UnaryRequest request, ServerCallContext context)
    {
        await EchoMetadataAsync(context, request.CompressReply);
        ThrowIfAsked(request.Fail);
        return new UnaryReply
        {
            Payload = Payloads.Create(request.ReplySize),
            RequestSha256 = ByteString.CopyFrom(SHA256.HashData(request.Payload.Span)),
            RequestEncoding = context.GetHttpContext().Request.Headers["grpc-encoding"].ToString(),
        };
    }

    public override async Task<UploadSummary> Upload(IAsyncStreamReader<Chunk> requestStream, ServerCallContext context)
    {
        using var hash = IncrementalHash.CreateHash(HashAlgorithmName.SHA256);
        var summary = new UploadSummary();
        await foreach (var chunk in requestStream.ReadAllAsync(context.CancellationToken))
        {
            summary.Count++;
            summary.TotalSize += chunk.Payload.Length;
            hash.AppendData(chunk.Payload.Span);
        }

        summary.Sha256 = ByteString.CopyFrom(hash.GetHashAndReset());
        return summary;
    }

    public override async Task Download(DownloadRequest request, IServerStreamWriter<Chunk> responseStream, ServerCallContext context)
    {
        for (var i = 0; i < request.ReplySizes.Count; i++)
        {
            await responseStream.WriteAsync(new Chunk { Index = i, Payload = Payloads.Create(request.ReplySizes[i]) });
        }

        ThrowIfAsked(request.Fail);
    }

    public override async Task Conversation(IAsyncStreamReader<ConversationRequest> requestStream, IServerStreamWriter<Chunk> responseStream, ServerCallContext context)
    {
        await EchoMetadataAsync(context, compressReplies: false);
        await foreach (var request in requestStream.ReadAllAsync(context.CancellationToken))
        {
            // Written (and flushed) before the next request is read: the client sends its next one only after this.
            await responseStream.WriteAsync(new Chunk { Index = request.Index, Payload = Payloads.Create(request.ReplySize) });
        }
    }

    public override async Task Sleep(SleepRequest request, IServerStreamWriter<Chunk> responseStream, ServerCallContext context)
    {
        // Grpc.AspNetCore reports "no deadline" as DateTime.MaxValue.
        var timeLeft = context.Deadline == DateTime.MaxValue ? (TimeSpan?)null : context.Deadline - DateTime.UtcNow;
        for (var i = 0; i < request.RepliesFirst; i++)
        {
            await responseStream.WriteAsync(new Chunk { Index = i });
        }

        try
        {
            await Task.Delay(Timeout.Infinite, context.CancellationToken);
        }
        catch (OperationCanceledException)
        {
            // NOTE: on a deadline the token is cancelled by Grpc.AspNetCore's own timer or by the client's reset when its
            // timer fired first (both enforce it); which one wins is a race, so the outcome does not say.
            SleepSlot(request.CallId).TrySetResult(new SleepOutcome(timeLeft));
            throw;
        }
    }

    public override async Task<HoldReply> Hold(HoldRequest request, ServerCallContext context)
    {
        var group = _holds.GetOrAdd(request.Group, _ => new HoldGroup());
        var inFlight = Interlocked.Increment(ref group.InFlight);
        try
        {
            if (inFlight >= request.ReleaseAt)
            {
                group.Released.TrySetResult();
            }

            await group.Released.Task.WaitAsync(context.CancellationToken);
            return new HoldReply { InFlight = inFlight };
        }
        finally
        {
            Interlocked.Decrement(ref group.InFlight);
        }
    }

    private static async Task EchoMetadataAsync(ServerCallContext context, bool compressReplies)
    {
        var initial = new Metadata();
        foreach (var entry in context.RequestHeaders)
        {
            if (entry.Key.StartsWith(InitialEchoPrefix, StringComparison.Ordinal))
            {
                initial.Add(entry);
            }
            else if (entry.Key.StartsWith(TrailingEchoPrefix, StringComparison.Ordinal))
            {
                context.ResponseTrailers.Add(entry);
            }
        }

        if (compressReplies)
        {
            // Grpc.AspNetCore's per-call switch: the replies of this call are gzip-compressed.
            initial.Add("grpc-internal-encoding-request", "gzip");
        }

        if (initial.Count > 0)
        {
            await context.WriteResponseHeadersAsync(initial);
        }
    }

    private static void ThrowIfAsked(StatusToReturn? fail)
    {
        if (fail is not null)
        {
            throw new RpcException(new Status((StatusCode)fail.Code, fail.Message));
        }
    }

    private sealed class HoldGroup
    {
        public int InFlight;
        public readonly TaskCompletionSource Released = new(TaskCreationOptions.RunContinuationsAsynchronously);
    }
}

/// <summary>
/// Payloads whose every byte is checked: byte i is i mod 251 (a prime period, so a slice shifted by a buffer size
/// does not match; repetitive, so gzip shrinks it).
/// </summary>
public static class Payloads
{
    public static ByteString Create(int size)
    {
        var bytes = new byte[size];
        for (var i = 0; i < size; i++)
        {
            bytes[i] = (byte)(i % 251);
        }

        return ByteString.CopyFrom(bytes);
    }

    /// <summary>True when <paramref name="payload"/> is exactly <see cref="Create"/>(<paramref name="size"/>).</summary>
    public static bool IsExpected(ByteString payload, int size) => payload.Length == size && payload.Span.SequenceEqual(Create(size).Span);
}
