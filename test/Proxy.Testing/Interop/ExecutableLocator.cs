namespace Proxy.Testing.Interop;

/// <summary>Finds executables on PATH the way a shell would (first match wins).</summary>
public static class ExecutableLocator
{
    public static string? Find(string command)
    {
        if (command.Contains(System.IO.Path.DirectorySeparatorChar))
        {
            return File.Exists(command) ? command : null;
        }

        var path = Environment.GetEnvironmentVariable("PATH") ?? string.Empty;
        string[] suffixes = OperatingSystem.IsWindows() ? [".exe", ".cmd", ""] : [""];
        foreach (var directory in path.Split(System.IO.Path.PathSeparator, StringSplitOptions.RemoveEmptyEntries))
        {
            foreach (var suffix in suffixes)
            {
                var candidate = System.IO.Path.Combine(directory, command + suffix);
                if (File.Exists(candidate) && IsExecutable(candidate))
                {
                    return candidate;
                }
            }
        }

        return null;
    }

    private static bool IsExecutable(string file)
    {
        if (OperatingSystem.IsWindows())
        {
            return true;
        }

        const UnixFileMode anyExecute = UnixFileMode.UserExecute | UnixFileMode.GroupExecute | UnixFileMode.OtherExecute;
        return (File.GetUnixFileMode(file) & anyExecute) != 0;
    }
}
