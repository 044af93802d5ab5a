using BenchmarkDotNet.Running;

namespace Proxy.Benchmarks;

public static class Program
{
    // `dotnet run -c Release --project benchmarks/Proxy.Benchmarks -- --filter '*'` (see benchmarks/README.md).
    public static void Main(string[] args) => BenchmarkSwitcher.FromAssembly(typeof(Program).Assembly).Run(args);
}
