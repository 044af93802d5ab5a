using System.Diagnostics;
using System.Text;

namespace Proxy.Testing.Interop;

/// <summary>The outcome of one external tool run.</summary>
public sealed record ToolResult(int ExitCode, string StandardOutput, string StandardError, string CommandLine)
{
    /// <summary>Everything a failing assertion should show.</summary>
    public override string ToString() =>
        $"$ {CommandLine}\nexit {ExitCode}\n--- stdout ---\n{Truncate(StandardOutput)}\n--- stderr ---\n{Truncate(StandardError)}";

    private static string Truncate(string s) => s.Length <= 4000 ? s : s[..2000] + "\n...\n" + s[^2000..];
}

/// <summary>Runs an external tool with a bounded lifetime and captures its output.</summary>
public static class ToolProcess
{
    public static async Task<ToolResult> RunAsync(
        InteropTool tool,
        IEnumerable<string> arguments,
        TimeSpan timeout,
        string? workingDirectory = null,
        CancellationToken cancellationToken = default)
    {
        var start = new ProcessStartInfo(tool.Require())
        {
            RedirectStandardOutput = true,
            RedirectStandardError = true,
            RedirectStandardInput = true,
            UseShellExecute = false,
            WorkingDirectory = workingDirectory ?? Environment.CurrentDirectory,
        };
        foreach (var argument in arguments)
        {
            start.ArgumentList.Add(argument);
        }

        var commandLine = tool.Command + " " + string.Join(" ", start.ArgumentList.Select(Quote));
        using var process = new Process { StartInfo = start };
        var stdout = new StringBuilder();
        var stderr = new StringBuilder();
        process.OutputDataReceived += (_, e) => { if (e.Data is not null) { lock (stdout) { stdout.AppendLine(e.Data); } } };
        process.ErrorDataReceived += (_, e) => { if (e.Data is not null) { lock (stderr) { stderr.AppendLine(e.Data); } } };
        process.Start();
        process.StandardInput.Close();
        process.BeginOutputReadLine();
        process.BeginErrorReadLine();

        using var cts = CancellationTokenSource.CreateLinkedTokenSource(cancellationToken);
        cts.CancelAfter(timeout);
        try
        {
            await process.WaitForExitAsync(cts.Token);
        }
        catch (OperationCanceledException)
        {
            // NOTE: only the process we started is killed (with its children), never by name.
            process.Kill(entireProcessTree: true);
            await process.WaitForExitAsync(CancellationToken.None);
            throw new TimeoutException($"'{commandLine}' did not finish within {timeout}.\nstdout:\n{stdout}\nstderr:\n{stderr}");
        }

        // WaitForExitAsync returns after the redirected streams reach EOF, so the output is complete.
        return new ToolResult(process.ExitCode, stdout.ToString(), stderr.ToString(), commandLine);
    }

    private static string Quote(string s) => s.Contains(' ') ? "'" + s + "'" : s;
}
