using System.Text.Json;
using System.Text.Json.Nodes;
using System.Text.Json.Serialization;
using Proxy.Forwarding.Configuration;

namespace Proxy.Host.Admin;

/// <summary>
/// The effective routes and clusters as JSON (admin <c>/config</c>), in the config file's own key names, with secrets
/// replaced by <see cref="Redacted"/>: anything named like a token, password or key, the values header transforms set on
/// credential headers (Authorization, Cookie, API keys), and user info in destination addresses.
/// </summary>
internal static class ConfigDump
{
    public const string Redacted = "***";

    private static readonly JsonSerializerOptions Json = new()
    {
        WriteIndented = true,
        DefaultIgnoreCondition = JsonIgnoreCondition.WhenWritingNull,
        Converters = { new JsonStringEnumConverter() },
    };

    /// <summary>Property names whose values are secrets wherever they appear (metadata, future options).</summary>
    private static readonly string[] SecretNameParts = ["token", "password", "passphrase", "secret", "apikey", "api-key", "api_key", "credential", "privatekey"];

    /// <summary>Header transforms whose header name is in this list (or contains a secret name part) have their values hidden.</summary>
    private static readonly string[] CredentialHeaders = ["authorization", "proxy-authorization", "cookie", "set-cookie", "x-api-key", "api-key"];

    private static readonly string[] HeaderTransformKinds = ["RequestHeader", "ResponseHeader", "ResponseTrailer"];

    public static string Render(IProxyStateLookup state)
    {
        var root = new JsonObject
        {
            ["Routes"] = ToObject(state.Routes.OrderBy(r => r.RouteId, StringComparer.Ordinal), r => r.RouteId),
            ["Clusters"] = ToObject(state.Clusters.Select(c => c.Config).OrderBy(c => c.ClusterId, StringComparer.Ordinal), c => c.ClusterId),
        };
        if (state.LastReloadError is { } error)
        {
            root["LastReloadError"] = error;
        }

        Redact(root);
        return root.ToJsonString(Json);
    }

    private static JsonObject ToObject<T>(IEnumerable<T> items, Func<T, string> id)
    {
        var result = new JsonObject();
        foreach (var item in items)
        {
            result[id(item)] = JsonSerializer.SerializeToNode(item, Json);
        }

        return result;
    }

    /// <summary>Walks the tree and hides secrets in place.</summary>
    internal static void Redact(JsonNode? node)
    {
        switch (node)
        {
            case JsonObject obj:
                RedactHeaderTransform(obj);
                foreach (var (name, value) in obj.ToList())
                {
                    if (value is JsonValue && IsSecretName(name))
                    {
                        obj[name] = Redacted;
                    }
                    else if (value is JsonValue && name == "Address" && value.GetValueKind() == JsonValueKind.String)
                    {
                        obj[name] = WithoutUserInfo(value.GetValue<string>());
                    }
                    else
                    {
                        Redact(value);
                    }
                }

                break;
            case JsonArray array:
                foreach (var item in array)
                {
                    Redact(item);
                }

                break;
        }
    }

    /// <summary>{ "RequestHeader": "Authorization", "Set": "Bearer ..." }: the value goes, the header name stays.</summary>
    private static void RedactHeaderTransform(JsonObject transform)
    {
        foreach (var kind in HeaderTransformKinds)
        {
            if (transform[kind] is JsonValue header && header.GetValueKind() == JsonValueKind.String
                && IsCredentialHeader(header.GetValue<string>()))
            {
                foreach (var action in new[] { "Set", "Append" })
                {
                    if (transform.ContainsKey(action))
                    {
                        transform[action] = Redacted;
                    }
                }
            }
        }
    }

    private static bool IsCredentialHeader(string name) =>
        CredentialHeaders.Contains(name.ToLowerInvariant()) || IsSecretName(name) || name.Contains("auth", StringComparison.OrdinalIgnoreCase);

    private static bool IsSecretName(string name) =>
        SecretNameParts.Any(part => name.Contains(part, StringComparison.OrdinalIgnoreCase));

    /// <summary>The address with any user info (user:password@) replaced by <see cref="Redacted"/>.</summary>
    internal static string WithoutUserInfo(string address) =>
        Uri.TryCreate(address, UriKind.Absolute, out var uri) && uri.UserInfo.Length > 0
            ? new UriBuilder(uri) { UserName = Redacted, Password = "" }.Uri.ToString()
            : address;
}
