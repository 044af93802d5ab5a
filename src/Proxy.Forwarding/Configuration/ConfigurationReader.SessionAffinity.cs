using Microsoft.AspNetCore.Http;
using Microsoft.Extensions.Configuration;

namespace Proxy.Forwarding.Configuration;

internal static partial class ConfigurationReader
{
    private static SessionAffinityConfig? ReadSessionAffinity(IConfigurationSection s, List<string> errors)
    {
        if (!s.Exists())
        {
            return null;
        }

        var cookie = s.GetSection("Cookie");
        return new SessionAffinityConfig
        {
            Enabled = Bool(s, "Enabled", errors),
            Policy = s["Policy"],
            FailurePolicy = s["FailurePolicy"],
            AffinityKeyName = s["AffinityKeyName"],
            Cookie = !cookie.Exists() ? null : new SessionAffinityCookieConfig
            {
                Domain = cookie["Domain"],
                Expiration = Time(cookie, "Expiration", errors),
                HttpOnly = Bool(cookie, "HttpOnly", errors),
                IsEssential = Bool(cookie, "IsEssential", errors),
                MaxAge = Time(cookie, "MaxAge", errors),
                Path = cookie["Path"],
                SameSite = cookie["SameSite"] is null ? null : Enum(cookie, "SameSite", SameSiteMode.Unspecified, errors),
                SecurePolicy = cookie["SecurePolicy"] is null ? null : Enum(cookie, "SecurePolicy", CookieSecurePolicy.SameAsRequest, errors),
            },
        };
    }
}
