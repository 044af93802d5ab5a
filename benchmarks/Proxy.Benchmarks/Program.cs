using System.Globalization;
using BenchmarkDotNet.Configs;
using BenchmarkDotNet.Jobs;
using BenchmarkDotNet.Running;
using Proxy.Benchmarks.Diagnostics;

namespace Proxy.Benchmarks;

public static class Program
{
    // `dotnet run -c Release --project benchmarks/Proxy.Benchmarks -- --filter '*'` (see benchmarks/README.md).
    // NOTE: the default job is BenchmarkDotNet's ShortRun (3 warm-ups, 3 iterations, 1 launch) so the whole
    // suite takes minutes, not an hour; `--job default` (or any --job) on the command line replaces it.
    public static async Task Main(string[] args)
    {
        if (args.Length > 0 && args[0] == "--alloc-sample")
        {
            int concurrency = args.Length > 1 ? int.Parse(args[1], CultureInfo.InvariantCulture) : 70;
            int requests = args.Length > 2 ? int.Parse(args[2], CultureInfo.InvariantCulture) : 200_000;
            await AllocationSampler.RunAsync(concurrency, requests);
            return;
        }
        if (args.Length > 0 && args[0] == "--alloc-sample-h1")
        {
            string stack = args.Length > 1 ? args[1] : "engine";
            int depth = args.Length > 2 ? int.Parse(args[2], CultureInfo.InvariantCulture) : 1;
            int requests = args.Length > 3 ? int.Parse(args[3], CultureInfo.InvariantCulture) : 200_000;
            await AllocationSampler.RunHttp1Async(stack, depth, requests);
            return;
        }

        var config = DefaultConfig.Instance.AddJob(Job.ShortRun.AsDefault());
        BenchmarkSwitcher.FromAssembly(typeof(Program).Assembly).Run(args, config);
    }
}
