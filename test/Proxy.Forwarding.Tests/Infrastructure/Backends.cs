using System.Text.Json;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Http;

namespace Proxy.Forwarding.Tests.Infrastructure;

/// <summary>Backends the tests share.</summary>
public static class Backends
{
    /// <summary>Echoes what it received as JSON: method, path, query, protocol, headers.</summary>
    public static Task<TestApp> StartEchoAsync(TestProtocol protocol = TestProtocol.Http1) =>
        ProxyTestHost.StartBackendAsync(app => app.Run(async context =>
        {
            var body = await new StreamReader(context.Request.Body).ReadToEndAsync(context.RequestAborted);
            var echo = new EchoResult
            {
                Method = context.Request.Method,
                Path = context.Request.Path.Value ?? "",
                RawPath = context.Request.Path.ToUriComponent(),
                Query = context.Request.QueryString.Value ?? "",
                Protocol = context.Request.Protocol,
                Body = body,
                Headers = context.Request.Headers.ToDictionary(h => h.Key.ToLowerInvariant(), h => h.Value.ToString()),
            };
            context.Response.Headers["x-backend"] = "echo";
            await context.Response.WriteAsJsonAsync(echo, context.RequestAborted);
        }), protocol);

    public static async Task<EchoResult> ReadEchoAsync(this HttpResponseMessage response)
    {
        var text = await response.Content.ReadAsStringAsync();
        Assert.True(response.IsSuccessStatusCode, $"{(int)response.StatusCode}: {text}");
        return JsonSerializer.Deserialize<EchoResult>(text, new JsonSerializerOptions(JsonSerializerDefaults.Web))!;
    }
}

public sealed class EchoResult
{
    public string Method { get; set; } = "";
    public string Path { get; set; } = "";
    public string RawPath { get; set; } = "";
    public string Query { get; set; } = "";
    public string Protocol { get; set; } = "";
    public string Body { get; set; } = "";
    public Dictionary<string, string> Headers { get; set; } = [];
}
