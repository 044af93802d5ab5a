using System.Diagnostics;
using System.Text;

namespace Proxy.Host.Tests;

/// <summary>The proxy as a child process (the same dotnet that runs the test); lines of its output can be awaited.</summary>
// Owned by the test; output callbacks run on the process's reader threads, guarded by _lock.
internal sealed class ProxyProcess : IDisposable
{
    private readonly Lock _lock = new();
    private readonly StringBuilder _output = new();
    private readonly List<(string Text, TaskCompletionSource<string> Found)> _waiters = [];

    private ProxyProcess(Process process)
    {
        Process = process;
        process.OutputDataReceived += (_, e) => OnLine(e.Data);
        process.ErrorDataReceived += (_, e) => OnLine(e.Data);
        process.BeginOutputReadLine();
        process.BeginErrorReadLine();
    }

    public Process Process { get; }

    public static ProxyProcess Start(string dll, params string[] arguments) => StartIn(workingDirectory: null, dll, arguments);

    /// <summary>As <see cref="Start"/>, with <paramref name="workingDirectory"/> as the process's current folder (its content root).</summary>
    public static ProxyProcess StartIn(string? workingDirectory, string dll, params string[] arguments)
        => StartIn(workingDirectory, environment: null, dll, arguments);

    /// <summary>As <see cref="StartIn(string?, string, string[])"/>, with <paramref name="environment"/> added to the inherited variables.</summary>
    public static ProxyProcess StartIn(string? workingDirectory, IReadOnlyDictionary<string, string>? environment, string dll, params string[] arguments)
    {
        var dotnet = Environment.GetEnvironmentVariable("DOTNET_HOST_PATH") is { Length: > 0 } host && File.Exists(host) ? host : "dotnet";
        var start = new ProcessStartInfo(dotnet) { RedirectStandardOutput = true, RedirectStandardError = true, UseShellExecute = false };
        if (workingDirectory is not null)
        {
            start.WorkingDirectory = workingDirectory;
        }
        foreach (var (name, value) in environment ?? new Dictionary<string, string>())
        {
            start.Environment[name] = value;
        }
        start.ArgumentList.Add(dll);
        foreach (var argument in arguments)
        {
            start.ArgumentList.Add(argument);
        }

        return new ProxyProcess(Process.Start(start)!);
    }

    /// <summary>As <see cref="Start"/>, under an open-file limit of <paramref name="fileLimit"/> (soft and hard: the runtime cannot raise it).</summary>
    public static ProxyProcess StartWithFileLimit(int fileLimit, string dll, params string[] arguments)
    {
        var dotnet = Environment.GetEnvironmentVariable("DOTNET_HOST_PATH") is { Length: > 0 } host && File.Exists(host) ? host : "dotnet";
        var start = new ProcessStartInfo("/bin/sh") { RedirectStandardOutput = true, RedirectStandardError = true, UseShellExecute = false };
        start.ArgumentList.Add("-c");
        start.ArgumentList.Add($"ulimit -n {fileLimit} && exec \"$0\" \"$@\"");
        start.ArgumentList.Add(dotnet);
        start.ArgumentList.Add(dll);
        foreach (var argument in arguments)
        {
            start.ArgumentList.Add(argument);
        }

        return new ProxyProcess(Process.Start(start)!);
    }

    /// <summary>Sends SIGINT (Ctrl+C) to this process only, by its id.</summary>
    public void Interrupt()
    {
        const int SigInt = 2;
        Assert.Equal(0, Kill(Process.Id, SigInt));
    }

    /// <summary>True when this process ignores SIGINT (Linux: the SigIgn mask in /proc/self/status), so a child started from it does too.</summary>
    public static bool InheritsIgnoredSigInt()
    {
        const string Path = "/proc/self/status";
        if (!File.Exists(Path))
        {
            return false;
        }

        var line = File.ReadLines(Path).FirstOrDefault(l => l.StartsWith("SigIgn:", StringComparison.Ordinal));
        return line is not null && (Convert.ToUInt64(line["SigIgn:".Length..].Trim(), 16) & (1UL << (2 - 1))) != 0; // SIGINT is 2
    }

    [System.Runtime.InteropServices.DllImport("libc", EntryPoint = "kill", SetLastError = true)]
    private static extern int Kill(int pid, int signal);

    /// <summary>The first output line containing <paramref name="text"/>; fails (not hangs) if the process exits first.</summary>
    public async Task<string> WaitForLineAsync(string text)
    {
        var found = new TaskCompletionSource<string>(TaskCreationOptions.RunContinuationsAsynchronously);
        lock (_lock)
        {
            var earlier = _output.ToString().Split('\n').FirstOrDefault(l => l.Contains(text, StringComparison.Ordinal));
            if (earlier is not null)
            {
                return earlier;
            }

            _waiters.Add((text, found));
        }

        var first = await Task.WhenAny(found.Task, Process.WaitForExitAsync());
        if (first != found.Task && !found.Task.IsCompleted)
        {
            string output;
            lock (_lock)
            {
                output = _output.ToString();
            }

            throw new InvalidOperationException($"The proxy exited without a line containing '{text}':\n{output}");
        }

        return await found.Task;
    }

    private void OnLine(string? line)
    {
        if (line is null)
        {
            return;
        }

        lock (_lock)
        {
            _output.AppendLine(line);
            foreach (var waiter in _waiters.Where(w => line.Contains(w.Text, StringComparison.Ordinal)).ToList())
            {
                waiter.Found.TrySetResult(line);
                _waiters.Remove(waiter);
            }
        }
    }

    public void Dispose()
    {
        if (!Process.HasExited)
        {
            Process.Kill(entireProcessTree: true); // only the process this test started, by its handle
            Process.WaitForExit(10_000);
        }

        Process.Dispose();
    }
}
