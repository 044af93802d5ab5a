namespace Proxy.Forwarding.Configuration;

internal static partial class ConfigValidator
{
    private static void ValidateSessionAffinity(SessionAffinityConfig? affinity, string path, List<string> errors)
    {
        if (affinity is null)
        {
            return;
        }

        CheckName(affinity.Policy, $"{path}:Policy", errors, SessionAffinityPolicies.HashCookie, SessionAffinityPolicies.ArrCookie,
            SessionAffinityPolicies.Cookie, SessionAffinityPolicies.CustomHeader);
        CheckName(affinity.FailurePolicy, $"{path}:FailurePolicy", errors,
            SessionAffinityFailurePolicies.Redistribute, SessionAffinityFailurePolicies.Return503Error);
        if (affinity.Enabled == true && string.IsNullOrWhiteSpace(affinity.AffinityKeyName))
        {
            errors.Add($"{path}:AffinityKeyName: is required when session affinity is enabled (the cookie or header name).");
        }
        else if (affinity.AffinityKeyName is { } name && !Forwarder.HttpSyntax.IsToken(name))
        {
            errors.Add($"{path}:AffinityKeyName: '{name}' is not a valid cookie or header name.");
        }

        if (affinity.Cookie is { } cookie)
        {
            CheckPositive(cookie.Expiration, $"{path}:Cookie:Expiration", errors);
            CheckPositive(cookie.MaxAge, $"{path}:Cookie:MaxAge", errors);
        }
    }
}
