namespace Proxy.Forwarding.Tests;

/// <summary>
/// The forwarding layer depends on ASP.NET Core only: never on our engine (Server, Protocols, Transport, Codecs) nor on
/// the native relay, which plugs into it through DI (shared/design/ARCHITECTURE.md, "The native relay").
/// </summary>
public class ArchitectureTests
{
    [Fact]
    public void Forwarding_ReferencesNeitherTheEngineNorTheRelay()
    {
        var references = typeof(ProxyForwardingExtensions).Assembly.GetReferencedAssemblies().Select(a => a.Name!).ToArray();
        Assert.DoesNotContain(references, r => r is "Proxy.Server" or "Proxy.Protocols" or "Proxy.Transport" or "Proxy.Codecs" or "Proxy.Relay");
        Assert.Contains(references, r => r.StartsWith("Microsoft.AspNetCore", StringComparison.Ordinal));
    }
}
