using System.Text;
using Proxy.Codecs.Http1;

namespace Proxy.Codecs.Tests.Http1;

// Owned by one test.
internal sealed class RecordingSink : IHttp1RequestSink
{
    public string? Method { get; private set; }
    public string? Target { get; private set; }
    public Http1Version Version { get; private set; }
    public Http1TargetForm Form { get; private set; }
    public List<(string Name, string Value)> Fields { get; } = new();
    public int RequestLineCalls { get; private set; }

    public void OnRequestLine(ReadOnlySpan<byte> method, ReadOnlySpan<byte> target, Http1Version version, Http1TargetForm form)
    {
        RequestLineCalls++;
        Method = Encoding.ASCII.GetString(method);
        Target = Encoding.ASCII.GetString(target);
        Version = version;
        Form = form;
    }

    public void OnField(ReadOnlySpan<byte> name, ReadOnlySpan<byte> value) =>
        Fields.Add((Encoding.ASCII.GetString(name), Encoding.Latin1.GetString(value)));
}
