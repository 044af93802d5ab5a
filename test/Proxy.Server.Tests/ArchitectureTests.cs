using System.Reflection;

namespace Proxy.Server.Tests;

/// <summary>
/// Keeps the layer rules of shared/design/ARCHITECTURE.md true: arrows only point down
/// (Server -> Protocols, Transport; Protocols -> Codecs, Buffers), and the lower layers stay free of ASP.NET.
/// </summary>
public class ArchitectureTests
{
    private static string[] ReferencedAssemblies(string name)
    {
        var assembly = Assembly.Load(name);
        return assembly.GetReferencedAssemblies().Select(a => a.Name!).ToArray();
    }

    [Fact]
    public void Codecs_ReferencesOnlyTheBaseClassLibrary()
    {
        var references = ReferencedAssemblies("Proxy.Codecs");
        Assert.DoesNotContain(references, r => r.StartsWith("Proxy.", StringComparison.Ordinal));
        Assert.DoesNotContain(references, r => r.StartsWith("Microsoft.AspNetCore", StringComparison.Ordinal));
        Assert.DoesNotContain(references, r => r.StartsWith("Microsoft.Extensions", StringComparison.Ordinal));
        Assert.DoesNotContain(references, r => r == "System.Net.Sockets" || r == "System.IO.Pipelines");
    }

    [Fact]
    public void Buffers_ReferencesNoOtherProjectAndNoAspNet()
    {
        var references = ReferencedAssemblies("Proxy.Buffers");
        Assert.DoesNotContain(references, r => r.StartsWith("Proxy.", StringComparison.Ordinal));
        Assert.DoesNotContain(references, r => r.StartsWith("Microsoft.AspNetCore", StringComparison.Ordinal));
        Assert.DoesNotContain(references, r => r.StartsWith("Microsoft.Extensions", StringComparison.Ordinal));
        Assert.DoesNotContain("System.Net.Sockets", references);
    }

    [Fact]
    public void Protocols_ReferencesCodecsButNoHostOrTransport()
    {
        var references = ReferencedAssemblies("Proxy.Protocols");
        Assert.Contains("Proxy.Codecs", references);
        Assert.Contains("Proxy.Buffers", references); // the stream pipes
        Assert.DoesNotContain(references, r => r is "Proxy.Server" or "Proxy.Transport" or "Proxy.Forwarding");
        Assert.DoesNotContain(references, r => r.StartsWith("Microsoft.AspNetCore", StringComparison.Ordinal));
    }

    [Fact]
    public void Transport_DoesNotReferenceProtocolsOrServer()
    {
        var references = ReferencedAssemblies("Proxy.Transport");
        Assert.DoesNotContain(references, r => r is "Proxy.Server" or "Proxy.Protocols" or "Proxy.Codecs" or "Proxy.Forwarding");
    }

    [Fact]
    public void Server_DoesNotReferenceForwarding()
    {
        var references = ReferencedAssemblies("Proxy.Server");
        Assert.DoesNotContain("Proxy.Forwarding", references);
    }
}
