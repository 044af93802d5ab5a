using System.Buffers.Text;
using System.Security.Cryptography;
using System.Text;
using Microsoft.AspNetCore.DataProtection;
using Microsoft.AspNetCore.Http;
using Proxy.Forwarding.BackendPools;
using Proxy.Forwarding.Configuration;

namespace Proxy.Forwarding.SessionAffinity;

/// <summary>What the request's affinity key said.</summary>
internal enum AffinityOutcome
{
    /// <summary>No key: load balancing chooses, and the response gets a key.</summary>
    NoKey,
    /// <summary>The key names an available destination: it serves the request.</summary>
    Found,
    /// <summary>The key cannot be read, or its destination is unavailable or gone: the failure policy decides.</summary>
    Failed,
}

/// <summary>
/// A cluster's session affinity: reads the key a request carries (cookie or header) and writes one on the response of a
/// request that had none, or whose key failed. Cookie and CustomHeader keys are the destination's name protected with ASP.NET
/// Core Data Protection (readable by proxies that share the key ring); HashCookie and ArrCookie keys are hashes of the name,
/// so any proxy with the same destinations reads them.
/// </summary>
// Immutable; built with its ClusterState and replaced with it.
internal sealed class SessionAffinityState
{
    private const string ProtectorPurpose = "Proxy.Forwarding.SessionAffinity";

    private readonly string _keyName;
    private readonly bool _inCookie;
    private readonly SessionAffinityCookieConfig _cookie;
    private readonly IDataProtector? _protector;
    private readonly bool _fullHash;
    private readonly Dictionary<string, string>? _destinationByHash;

    private SessionAffinityState(SessionAffinityConfig config, string policy, IReadOnlyList<DestinationState> destinations, IDataProtectionProvider? protection)
    {
        _keyName = config.AffinityKeyName!;
        _inCookie = !Is(policy, SessionAffinityPolicies.CustomHeader);
        _cookie = config.Cookie ?? new SessionAffinityCookieConfig();
        Return503OnFailure = Is(config.FailurePolicy, SessionAffinityFailurePolicies.Return503Error);
        if (Is(policy, SessionAffinityPolicies.Cookie) || Is(policy, SessionAffinityPolicies.CustomHeader))
        {
            _protector = (protection ?? throw new InvalidOperationException("Session affinity policy " + policy + " needs ASP.NET Core Data Protection (services.AddDataProtection()).")).CreateProtector(ProtectorPurpose);
        }
        else
        {
            // A hash cannot be reversed: every destination's hash is computed once, here.
            _fullHash = Is(policy, SessionAffinityPolicies.ArrCookie);
            _destinationByHash = new Dictionary<string, string>(StringComparer.OrdinalIgnoreCase);
            foreach (var d in destinations)
            {
                _destinationByHash[Hash(d.DestinationId)] = d.DestinationId;
            }
        }
    }

    /// <summary>The failure policy is Return503Error (else Redistribute).</summary>
    public bool Return503OnFailure { get; }

    /// <summary>The cluster's affinity, or null when it has none (or it is not enabled).</summary>
    public static SessionAffinityState? Create(ClusterConfig cluster, IReadOnlyList<DestinationState> destinations, IDataProtectionProvider? protection) =>
        cluster.SessionAffinity is { Enabled: true } config
            ? new SessionAffinityState(config, config.Policy ?? SessionAffinityPolicies.HashCookie, destinations, protection)
            : null;

    /// <summary>Looks the request's key up among the destinations that may be used now.</summary>
    public (AffinityOutcome Outcome, DestinationState? Destination) Find(HttpContext context, IReadOnlyList<DestinationState> available)
    {
        var key = _inCookie ? context.Request.Cookies[_keyName] : context.Request.Headers[_keyName].ToString();
        if (string.IsNullOrEmpty(key))
        {
            return (AffinityOutcome.NoKey, null);
        }

        if (Decode(key) is { } destinationId)
        {
            foreach (var d in available)
            {
                if (string.Equals(d.DestinationId, destinationId, StringComparison.OrdinalIgnoreCase))
                {
                    return (AffinityOutcome.Found, d);
                }
            }
        }

        return (AffinityOutcome.Failed, null);
    }

    /// <summary>Gives the response a key for <paramref name="destination"/> (it replaces a failed one in the client).</summary>
    public void Affinitize(HttpContext context, DestinationState destination)
    {
        var value = Encode(destination.DestinationId);
        // On starting, not now: the forwarder copies the backend's headers first, and the backend's own cookies stay.
        context.Response.OnStarting(() =>
        {
            if (_inCookie)
            {
                context.Response.Cookies.Append(_keyName, value, CookieOptions(context));
            }
            else
            {
                context.Response.Headers[_keyName] = value;
            }

            return Task.CompletedTask;
        });
    }

    private CookieOptions CookieOptions(HttpContext context) => new()
    {
        Domain = _cookie.Domain,
        Path = _cookie.Path ?? "/",
        HttpOnly = _cookie.HttpOnly ?? true,
        IsEssential = _cookie.IsEssential ?? false,
        MaxAge = _cookie.MaxAge,
        SameSite = _cookie.SameSite ?? SameSiteMode.Unspecified,
        Secure = (_cookie.SecurePolicy ?? CookieSecurePolicy.SameAsRequest) switch
        {
            CookieSecurePolicy.Always => true,
            CookieSecurePolicy.None => false,
            _ => context.Request.IsHttps,
        },
        Expires = _cookie.Expiration is { } expiration ? DateTimeOffset.UtcNow + expiration : null,
    };

    private string Encode(string destinationId) => _protector is not null
        ? Base64Url.EncodeToString(_protector.Protect(Encoding.UTF8.GetBytes(destinationId)))
        : Hash(destinationId);

    private string? Decode(string key)
    {
        if (_protector is null)
        {
            return _destinationByHash!.GetValueOrDefault(key);
        }

        try
        {
            return Encoding.UTF8.GetString(_protector.Unprotect(Base64Url.DecodeFromChars(key)));
        }
        catch (Exception ex) when (ex is CryptographicException or FormatException)
        {
            return null; // Forged, from another key ring, or truncated: a failed key, not an error of the request.
        }
    }

    /// <summary>
    /// ArrCookie: SHA-256 of the name in lowercase hex (IIS ARR's form). HashCookie: its first 8 bytes, a shorter cookie.
    /// NOTE: YARP's HashCookie uses XxHash64, which is not in the shared framework, so its keys differ from ours.
    /// </summary>
    private string Hash(string destinationId)
    {
        var hash = SHA256.HashData(Encoding.UTF8.GetBytes(destinationId.ToLowerInvariant()));
        return Convert.ToHexStringLower(_fullHash ? hash : hash.AsSpan(0, 8));
    }

    private static bool Is(string? value, string name) => string.Equals(value, name, StringComparison.OrdinalIgnoreCase);
}
