using System.Text.Json;
using Proxy.FunctionalTests.Hosting;
using Proxy.Testing.Interop;

namespace Proxy.FunctionalTests.Grpc;

/// <summary>
/// Runs grpc-client/client.js (grpc-js) for one scenario against a test host and parses its JSON output.
/// </summary>
public static class GrpcJsClient
{
    private static readonly Lazy<string?> s_clientDirectory = new(FindClientDirectory);

    /// <summary>The folder holding client.js, found by walking up from the test binaries to the source tree.</summary>
    public static string? ClientDirectory => s_clientDirectory.Value;

    /// <summary>Why grpc-js cannot run here, or null when it can.</summary>
    public static string? MissingReason()
    {
        if (InteropTool.Node.Path is null)
        {
            return InteropTool.Node.MissingMessage;
        }

        if (ClientDirectory is null)
        {
            return "test/Proxy.FunctionalTests/grpc-client/client.js was not found above the test binaries.";
        }

        return Directory.Exists(Path.Combine(ClientDirectory, "node_modules", "@grpc", "grpc-js"))
            ? null
            : $"grpc-js is not installed: run `npm ci` in {ClientDirectory}.";
    }

    /// <summary>Runs <paramref name="scenario"/>; each <paramref name="metadata"/> pair rides on the call as a request header.</summary>
    public static async Task<JsonElement> RunAsync(TestHost host, HttpTransport transport, string scenario, string? callId = null,
        IReadOnlyDictionary<string, string>? metadata = null, int? deadlineMilliseconds = null)
    {
        if (MissingReason() is { } reason)
        {
            throw new InvalidOperationException(reason);
        }

        var address = host.AddressFor(transport);
        List<string> arguments = [Path.Combine(ClientDirectory!, "client.js"), scenario, $"127.0.0.1:{address.Port}"];
        if (transport.IsTls())
        {
            arguments.AddRange(["--tls", TestCertificate.PemPath]);
        }

        if (callId is not null)
        {
            arguments.AddRange(["--call-id", callId]);
        }

        if (deadlineMilliseconds is { } deadline)
        {
            arguments.AddRange(["--deadline-ms", deadline.ToString(System.Globalization.CultureInfo.InvariantCulture)]);
        }

        foreach (var (key, value) in metadata ?? new Dictionary<string, string>())
        {
            arguments.AddRange(["--metadata", $"{key}={value}"]);
        }

        var result = await ToolProcess.RunAsync(InteropTool.Node, arguments, TimeSpan.FromSeconds(30), ClientDirectory);
        var line = result.StandardOutput.Split('\n', StringSplitOptions.RemoveEmptyEntries).LastOrDefault();
        Assert.True(result.ExitCode == 0 && line is not null, result.ToString());
        using var document = JsonDocument.Parse(line!);
        return document.RootElement.Clone();
    }

    private static string? FindClientDirectory()
    {
        for (var directory = new DirectoryInfo(AppContext.BaseDirectory); directory is not null; directory = directory.Parent)
        {
            var candidate = Path.Combine(directory.FullName, "test", "Proxy.FunctionalTests", "grpc-client");
            if (File.Exists(Path.Combine(candidate, "client.js")))
            {
                return candidate;
            }
        }

        return null;
    }
}

/// <summary>
/// A theory that needs node and the grpc-js packages: skipped with a hint on a developer's machine,
/// run (and failing loudly) under CI.
/// </summary>
[AttributeUsage(AttributeTargets.Method, AllowMultiple = false)]
public sealed class GrpcJsTheoryAttribute : TheoryAttribute
{
    public GrpcJsTheoryAttribute()
    {
        if (!InteropTool.IsCi)
        {
            Skip = GrpcJsClient.MissingReason();
        }
    }
}
