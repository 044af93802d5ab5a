using Microsoft.Extensions.Configuration;
using Proxy.Forwarding.Configuration;

namespace Proxy.Forwarding.Tests.Infrastructure;

/// <summary>Reads and validates a configuration the way a load does, for tests of error messages.</summary>
public static class ConfigCheck
{
    /// <summary>The config as read, and every error the reader and the validator report (<see cref="ProxyConfigDictionary.ReadAndValidate"/> gives the errors alone).</summary>
    internal static (ProxyConfig Config, List<string> Errors) Read(ProxyConfigDictionary values, bool nativeTransportAvailable = false)
    {
        var errors = new List<string>();
        var config = ConfigurationReader.Read(new ConfigurationBuilder().AddInMemoryCollection(values).Build().GetSection("ReverseProxy"), errors);
        ConfigValidator.Validate(config, "ReverseProxy", errors, nativeTransportAvailable: nativeTransportAvailable);
        return (config, errors);
    }

    /// <summary>One route r1 to cluster c1 with one destination: a valid base to add keys to.</summary>
    public static ProxyConfigDictionary Valid() =>
        new ProxyConfigDictionary().Route("r1", "c1").Destination("c1", "d1", "http://127.0.0.1:5000/");
}
