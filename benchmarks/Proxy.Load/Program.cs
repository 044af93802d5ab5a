// The load harness: `serve` hosts the benchmark backend, `run` drives load at a target. See README.md.
using System.Globalization;
using Proxy.Load.Client;
using Proxy.Load.Server;

return await Proxy.Load.LoadProgram.MainAsync(args);

namespace Proxy.Load
{
    public static class LoadProgram
    {
        private const string Usage = """
            Usage:
              Proxy.Load serve [--server proxy|kestrel] [--urls http://127.0.0.1:5201] [--h2c-port N] [--https-port N] [--sse-rate N]
              Proxy.Load run --scenario grpcnet-unary|grpcnet-serverstreaming|grpcnet-pingpong|http-get|http-post|sse --url URL
                  [--connections C] [--streams S] [--http 2|1.1] [--payload BYTES] [--request-size BYTES]
                  [--response-size BYTES] [--size BYTES] [--rate N | --every SECONDS] [--ramp SECONDS]
                  [--warmup SECONDS] [--duration SECONDS] [--label NAME] [--target-pid PID] [--json FILE]
                  [--no-header] [--no-progress]
            See benchmarks/Proxy.Load/README.md.
            """;

        public static async Task<int> MainAsync(string[] args)
        {
            try
            {
                return args switch
                {
                    ["serve", .. var rest] => await ServeAsync(rest),
                    ["run", .. var rest] => await RunAsync(rest),
                    ["--help" or "-h" or "help"] => Help(Console.Out, 0),
                    _ => Help(Console.Error, 2),
                };
            }
            catch (UsageException ex)
            {
                Console.Error.WriteLine(ex.Message);
                return Help(Console.Error, 2);
            }
        }

        private static int Help(TextWriter writer, int exitCode)
        {
            writer.WriteLine(Usage);
            return exitCode;
        }

        public static ServeOptions ParseServe(IReadOnlyList<string> args)
        {
            var values = CommandLine.Parse(args, ["--server", "--urls", "--h2c-port", "--https-port", "--sse-rate"], []);
            var server = values.GetValueOrDefault("--server") ?? "proxy";
            if (server is not ("proxy" or "kestrel"))
            {
                throw new UsageException("--server is proxy or kestrel.");
            }

            var urls = values.GetValueOrDefault("--urls") ?? "http://127.0.0.1:5201";
            if (!Uri.TryCreate(urls, UriKind.Absolute, out var url) || url.Scheme != Uri.UriSchemeHttp)
            {
                throw new UsageException($"--urls '{urls}' must be one http:// URL (TLS is --https-port).");
            }

            return new ServeOptions
            {
                Server = server,
                Host = url.Host == "localhost" ? "127.0.0.1" : url.Host.Trim('[', ']'),
                HttpPort = url.Port,
                H2cPort = Port(values, "--h2c-port"),
                HttpsPort = Port(values, "--https-port"),
                SseRate = Port(values, "--sse-rate") ?? 10,
            };

            static int? Port(Dictionary<string, string?> values, string name) =>
                values.GetValueOrDefault(name) is not { } text ? null
                : int.TryParse(text, NumberStyles.None, CultureInfo.InvariantCulture, out var n) ? n
                : throw new UsageException($"{name} '{text}' is not a number.");
        }

        private static async Task<int> ServeAsync(IReadOnlyList<string> args)
        {
            var options = ParseServe(args);
            await using var server = await BenchmarkServer.StartAsync(options);
            Console.WriteLine(
                $"ready server={options.Server} http={Trim(server.HttpAddress)} h2c={Trim(server.H2cAddress)} " +
                $"https={Trim(server.HttpsAddress)} pid={Environment.ProcessId}");
            await server.WaitForShutdownAsync();
            return 0;

            static string Trim(Uri? uri) => uri is null ? "-" : uri.GetLeftPart(UriPartial.Authority);
        }

        private static async Task<int> RunAsync(IReadOnlyList<string> args)
        {
            var options = LoadOptions.Parse(args);
            var result = await LoadRunner.RunAsync(options, options.NoProgress ? null : Console.Error);
            if (!options.NoHeader)
            {
                Console.WriteLine(RunResult.MarkdownHeader);
            }

            Console.WriteLine(result.ToMarkdownRow());
            if (options.JsonPath is { } path)
            {
                await File.AppendAllTextAsync(path, result.ToJson() + "\n");
            }

            if (!result.Clean)
            {
                Console.Error.WriteLine(result.Requests == 0
                    ? $"no request completed in the measured window (first error: {result.FirstError ?? "none"})"
                    : $"first error: {result.FirstError ?? "none"}");
            }

            return result.Clean ? 0 : 1;
        }
    }
}
