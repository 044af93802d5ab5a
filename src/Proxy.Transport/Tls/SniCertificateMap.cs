using System.Net.Security;

namespace Proxy.Transport.Tls;

/// <summary>
/// Server certificates by SNI host name, as Kestrel's <c>Endpoints:{name}:Sni</c>: an exact name first, then the longest
/// matching <c>*.suffix</c> wildcard, then <c>*</c>, then the endpoint's own certificate; with none of them the handshake is
/// refused. Names compare case-insensitively. Each entry yields the certificate's current context, so a reloaded one is
/// served from the next handshake on.
/// </summary>
// Immutable after construction; shared by the handshakes of one endpoint.
public sealed class SniCertificateMap
{
    private readonly Dictionary<string, Func<SslStreamCertificateContext>> _exact = new(StringComparer.OrdinalIgnoreCase);
    private readonly List<(string Suffix, Func<SslStreamCertificateContext> Context)> _wildcards = [];
    private readonly Func<SslStreamCertificateContext>? _fallback;

    /// <param name="byHost">Host names (<c>a.example.com</c>, <c>*.example.com</c>, <c>*</c>) and their certificates.</param>
    /// <param name="fallback">Used when no name matches (the endpoint's certificate), or null to refuse such handshakes.</param>
    public SniCertificateMap(IEnumerable<KeyValuePair<string, Func<SslStreamCertificateContext>>> byHost, Func<SslStreamCertificateContext>? fallback)
    {
        foreach (var (host, context) in byHost)
        {
            if (host == "*")
            {
                _fallback = context;
            }
            else if (host.StartsWith("*.", StringComparison.Ordinal))
            {
                _wildcards.Add((host[1..], context)); // ".example.com"
            }
            else
            {
                _exact[host] = context;
            }
        }

        // Longest suffix first: "*.api.example.com" beats "*.example.com".
        _wildcards.Sort((a, b) => b.Suffix.Length.CompareTo(a.Suffix.Length));
        _fallback ??= fallback;
    }

    /// <summary>The certificate for <paramref name="serverName"/> (null when the client sent no SNI), or null to refuse.</summary>
    public SslStreamCertificateContext? Select(string? serverName)
    {
        if (serverName is not null)
        {
            if (_exact.TryGetValue(serverName, out var exact))
            {
                return exact();
            }

            foreach (var (suffix, context) in _wildcards)
            {
                if (serverName.EndsWith(suffix, StringComparison.OrdinalIgnoreCase) && serverName.Length > suffix.Length)
                {
                    return context();
                }
            }
        }

        return _fallback?.Invoke();
    }
}
