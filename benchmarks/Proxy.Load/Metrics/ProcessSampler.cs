using System.Globalization;

namespace Proxy.Load.Metrics;

/// <summary>
/// Reads a target process's CPU time, memory and thread count from /proc (Linux): CPU as the utime + stime
/// delta between <see cref="Start"/> and <see cref="StopAsync"/>, memory and threads sampled every 250 ms.
/// </summary>
// Owned by the run; the sampling loop is its only background task.
public sealed class ProcessSampler
{
    // USER_HZ: the unit of utime/stime in /proc/PID/stat. Fixed at 100 by the kernel ABI on every
    // architecture .NET runs on (sysconf(_SC_CLK_TCK) reports it).
    private const double ClockTicksPerSecond = 100;

    private readonly int _pid;
    private readonly CancellationTokenSource _stop = new();
    private Task? _loop;
    private long _startTicks;
    private long _peakRssKb;
    private int _maxThreads;

    public ProcessSampler(int pid) => _pid = pid;

    public void Start()
    {
        _startTicks = ReadCpuTicks(_pid);
        Sample();
        _loop = Task.Run(async () =>
        {
            using var timer = new PeriodicTimer(TimeSpan.FromMilliseconds(250));
            try
            {
                while (await timer.WaitForNextTickAsync(_stop.Token))
                {
                    Sample();
                }
            }
            catch (OperationCanceledException)
            {
            }
        });
    }

    public async Task<TargetMetrics> StopAsync(long requests)
    {
        var endTicks = ReadCpuTicks(_pid);
        Sample();
        _stop.Cancel();
        if (_loop is not null)
        {
            await _loop;
        }

        var status = ReadStatus(_pid);
        var cpuSeconds = (endTicks - _startTicks) / ClockTicksPerSecond;
        return new TargetMetrics(
            Pid: _pid,
            CpuSeconds: cpuSeconds,
            CpuMsPerRequest: requests == 0 ? 0 : cpuSeconds * 1000 / requests,
            PeakWorkingSetMB: _peakRssKb / 1024.0,
            VmHwmMB: status.HwmKb / 1024.0,
            Threads: status.Threads,
            MaxThreads: _maxThreads);
    }

    private void Sample()
    {
        try
        {
            var status = ReadStatus(_pid);
            _peakRssKb = Math.Max(_peakRssKb, status.RssKb);
            _maxThreads = Math.Max(_maxThreads, status.Threads);
        }
        catch (IOException)
        {
            // The target exited: keep what was sampled.
        }
    }

    /// <summary>utime + stime (fields 14 and 15 of /proc/PID/stat), in clock ticks.</summary>
    public static long ReadCpuTicks(int pid)
    {
        var stat = File.ReadAllText($"/proc/{pid}/stat");
        // Field 2 (comm) is in parentheses and may contain spaces: count fields after the last ')'.
        var rest = stat[(stat.LastIndexOf(')') + 2)..].Split(' ');
        // rest[0] is field 3 (state), so field N is rest[N - 3].
        return long.Parse(rest[14 - 3], CultureInfo.InvariantCulture) + long.Parse(rest[15 - 3], CultureInfo.InvariantCulture);
    }

    public static (long RssKb, long HwmKb, int Threads) ReadStatus(int pid)
    {
        long rss = 0, hwm = 0;
        var threads = 0;
        foreach (var line in File.ReadLines($"/proc/{pid}/status"))
        {
            if (line.StartsWith("VmRSS:", StringComparison.Ordinal))
            {
                rss = ParseKb(line);
            }
            else if (line.StartsWith("VmHWM:", StringComparison.Ordinal))
            {
                hwm = ParseKb(line);
            }
            else if (line.StartsWith("Threads:", StringComparison.Ordinal))
            {
                threads = int.Parse(line.AsSpan("Threads:".Length).Trim(), CultureInfo.InvariantCulture);
            }
        }

        return (rss, hwm, threads);

        static long ParseKb(string line)
        {
            var value = line.AsSpan(line.IndexOf(':') + 1).Trim();
            return long.Parse(value[..value.IndexOf(' ')], CultureInfo.InvariantCulture);
        }
    }
}

/// <summary>What the target process spent during the measured window.</summary>
public sealed record TargetMetrics(
    int Pid, double CpuSeconds, double CpuMsPerRequest, double PeakWorkingSetMB, double VmHwmMB, int Threads, int MaxThreads);
