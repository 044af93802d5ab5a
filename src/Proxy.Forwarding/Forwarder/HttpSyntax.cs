using System.Buffers;

namespace Proxy.Forwarding.Forwarder;

/// <summary>RFC 9110 syntax checks shared by config validation and the per-request guard.</summary>
internal static class HttpSyntax
{
    // RFC 9110 §5.6.2: tchar.
    private static readonly SearchValues<char> TokenChars =
        SearchValues.Create("!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz");

    /// <summary>token = 1*tchar.</summary>
    public static bool IsToken(string? text) =>
        !string.IsNullOrEmpty(text) && text.AsSpan().IndexOfAnyExcept(TokenChars) < 0;
}
