using Microsoft.Extensions.Configuration;
using Proxy.Forwarding.Configuration;

namespace Proxy.Forwarding.Tests.Infrastructure;

/// <summary>Builds flat "ReverseProxy:..." keys the way a JSON file would produce them.</summary>
public sealed class ProxyConfigDictionary : Dictionary<string, string?>
{
    public ProxyConfigDictionary Route(string routeId, string clusterId, string? path = "/{**catch-all}")
    {
        this[$"ReverseProxy:Routes:{routeId}:ClusterId"] = clusterId;
        if (path is not null)
        {
            this[$"ReverseProxy:Routes:{routeId}:Match:Path"] = path;
        }

        return this;
    }

    public ProxyConfigDictionary Destination(string clusterId, string destinationId, string address)
    {
        this[$"ReverseProxy:Clusters:{clusterId}:Destinations:{destinationId}:Address"] = address;
        return this;
    }

    public ProxyConfigDictionary Set(string key, string? value)
    {
        this["ReverseProxy:" + key] = value;
        return this;
    }

    /// <summary>Reads and validates the configuration the way a load does (without the app's services); returns the errors.</summary>
    public List<string> ReadAndValidate()
    {
        var errors = new List<string>();
        var section = new ConfigurationBuilder().AddInMemoryCollection(this).Build().GetSection("ReverseProxy");
        ConfigValidator.Validate(ConfigurationReader.Read(section, errors), "ReverseProxy", errors);
        return errors;
    }

    /// <summary>Makes the cluster talk h2c to its destinations.</summary>
    public ProxyConfigDictionary H2c(string clusterId)
    {
        this[$"ReverseProxy:Clusters:{clusterId}:HttpRequest:Version"] = "2";
        this[$"ReverseProxy:Clusters:{clusterId}:HttpRequest:VersionPolicy"] = "RequestVersionExact";
        return this;
    }
}
