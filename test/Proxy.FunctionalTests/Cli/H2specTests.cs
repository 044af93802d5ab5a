using System.Xml.Linq;
using Proxy.FunctionalTests.Hosting;
using Proxy.Testing.Interop;
using Xunit.Abstractions;

namespace Proxy.FunctionalTests.Cli;

/// <summary>
/// h2spec conformance runs (generic, http2 and hpack suites) against the Hello app. h2spec has no Debian
/// package, so when it is not on PATH these skip even in CI.
/// </summary>
[Collection(SerialCollection.Name)]
public sealed class H2specTests(HelloAppFixture fixture, ITestOutputHelper output) : IClassFixture<HelloAppFixture>, IDisposable
{
    private readonly string _directory = Directory.CreateTempSubdirectory("proxy-h2spec-").FullName;

    public enum Mode
    {
        /// <summary>h2c prior knowledge, default cases.</summary>
        Cleartext,

        /// <summary>h2c prior knowledge, --strict (adds the cases that test SHOULDs and stricter MUST readings).</summary>
        CleartextStrict,

        /// <summary>TLS with ALPN h2, -t -k.</summary>
        Tls,
    }

    public static TheoryData<ServerKind, Mode> Modes()
    {
        var data = new TheoryData<ServerKind, Mode>();
        foreach (var kind in Enum.GetValues<ServerKind>())
        {
            foreach (var mode in Enum.GetValues<Mode>())
            {
                data.Add(kind, mode);
            }
        }

        return data;
    }

    [InteropTheory("h2spec")]
    [MemberData(nameof(Modes))]
    public async Task H2spec_AllCasesPass(ServerKind kind, Mode mode)
    {
        var host = await fixture.GetAsync(kind);
        var address = mode == Mode.Tls ? host.HttpsAddress! : host.H2cAddress;
        var report = Path.Combine(_directory, "report.xml");
        List<string> arguments = ["-h", "127.0.0.1", "-p", address.Port.ToString(), "-j", report];
        if (mode == Mode.CleartextStrict)
        {
            arguments.Add("--strict");
        }

        if (mode == Mode.Tls)
        {
            arguments.AddRange(["-t", "-k"]);
        }

        var result = await ToolProcess.RunAsync(InteropTool.H2spec, arguments, TimeSpan.FromMinutes(4));

        Assert.True(File.Exists(report), "h2spec wrote no JUnit report\n" + result);
        var summary = H2specReport.Parse(XDocument.Load(report));
        output.WriteLine($"h2spec {mode} on {kind}: {summary}");
        Assert.True(summary.Total > 100, $"suspiciously few h2spec cases: {summary}\n{result}");
        Assert.True(summary.Failed.Count == 0,
            $"h2spec {mode} on {kind}: {summary}\nFailed cases:\n{string.Join("\n", summary.Failed)}");
        // h2spec's exit code is non-zero when any case fails; with none failed it must be 0.
        Assert.True(result.ExitCode == 0, result.ToString());
    }

    public void Dispose() => Directory.Delete(_directory, recursive: true);
}

/// <summary>Counts from h2spec's JUnit report: a case failed when it has a failure or error element.</summary>
public sealed record H2specReport(int Total, int Passed, int Skipped, IReadOnlyList<string> Failed)
{
    public static H2specReport Parse(XDocument report)
    {
        int total = 0, passed = 0, skipped = 0;
        var failed = new List<string>();
        foreach (var suite in report.Descendants("testsuite"))
        {
            foreach (var testCase in suite.Elements("testcase"))
            {
                total++;
                var problem = testCase.Element("failure") ?? testCase.Element("error");
                if (problem is not null)
                {
                    var detail = problem.Value.ReplaceLineEndings(" / ").Trim();
                    failed.Add($"{suite.Attribute("package")?.Value} {suite.Attribute("name")?.Value}: {testCase.Attribute("classname")?.Value} -- {detail}");
                }
                else if (testCase.Element("skipped") is not null)
                {
                    skipped++;
                }
                else
                {
                    passed++;
                }
            }
        }

        return new H2specReport(total, passed, skipped, failed);
    }

    public override string ToString() => $"{Total} cases, {Passed} passed, {Skipped} skipped, {Failed.Count} failed";
}
