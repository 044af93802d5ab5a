using Proxy.Forwarding.Tests.Infrastructure;

namespace Proxy.Forwarding.Tests;

/// <summary>Malformed transforms are refused at load with the key that holds the bad value.</summary>
public class TransformConfigTests
{
    private static List<string> Validate(params (string Key, string Value)[] transform)
    {
        var values = ConfigCheck.Valid();
        foreach (var (key, value) in transform)
        {
            values.Set("Routes:r1:Transforms:0:" + key, value);
        }

        return values.ReadAndValidate();
    }

    private const string At = "ReverseProxy:Routes:r1:Transforms:0";

    [Theory]
    [InlineData("RequestHeadersAllowed", "x-a; x-b")]
    [InlineData("RequestHeadersAllowed", "")]
    [InlineData("ResponseHeadersAllowed", "Content-Type;X-Id")]
    [InlineData("ResponseTrailersAllowed", "grpc-status;grpc-message")]
    [InlineData("ResponseHeadersCopy", "false")]
    [InlineData("ResponseTrailersCopy", "True")]
    [InlineData("ClientCert", "X-Client-Cert")]
    public void Validate_GoodSingleKeyTransform_NoErrors(string key, string value)
    {
        Assert.Empty(Validate((key, value)));
    }

    [Fact]
    public void Validate_GoodTwoKeyTransforms_NoErrors()
    {
        Assert.Empty(Validate(("HttpMethodChange", "GET"), ("Set", "POST")));
        Assert.Empty(Validate(("QueryRouteParameter", "id"), ("Append", "orderId")));
        Assert.Empty(Validate(("RequestHeaderRouteValue", "x-tenant"), ("Set", "tenant")));
    }

    [Fact]
    public void Validate_BadCopyFlag_ErrorNamesTheKey()
    {
        Assert.Contains($"{At}:ResponseHeadersCopy: 'no' is not 'true' or 'false'.", Validate(("ResponseHeadersCopy", "no")));
        Assert.Contains($"{At}:ResponseTrailersCopy: 'off' is not 'true' or 'false'.", Validate(("ResponseTrailersCopy", "off")));
    }

    [Fact]
    public void Validate_BadAllowList_ErrorNamesTheKeyAndTheName()
    {
        var errors = Validate(("RequestHeadersAllowed", "x-a;bad name"));
        Assert.Contains($"{At}:RequestHeadersAllowed: 'bad name' is not a valid header name (expected names separated by ';').", errors);
        Assert.Single(Validate(("ResponseTrailersAllowed", "a,b:c")), e => e.StartsWith($"{At}:ResponseTrailersAllowed: 'a,b:c'", StringComparison.Ordinal));
    }

    [Fact]
    public void Validate_HttpMethodChange_NeedsSetAndTokens()
    {
        Assert.Contains($"{At}: transform 'HttpMethodChange' needs 'Set'.", Validate(("HttpMethodChange", "GET")));
        Assert.Contains($"{At}:Set: 'PO ST' is not a valid token (RFC 9110 §5.6.2).", Validate(("HttpMethodChange", "GET"), ("Set", "PO ST")));
        Assert.Contains($"{At}: unexpected key(s) 'Append' for transform 'HttpMethodChange'.", Validate(("HttpMethodChange", "GET"), ("Append", "POST")));
    }

    [Fact]
    public void Validate_RouteValueTransforms_NeedOneOfSetOrAppend()
    {
        Assert.Contains($"{At}: transform 'QueryRouteParameter' needs exactly one of 'Set' or 'Append'.", Validate(("QueryRouteParameter", "id")));
        Assert.Contains($"{At}: transform 'RequestHeaderRouteValue' needs exactly one of 'Set' or 'Append'.",
            Validate(("RequestHeaderRouteValue", "x-a"), ("Set", "a"), ("Append", "b")));
        Assert.Contains($"{At}:Set: a route value name is required.", Validate(("QueryRouteParameter", "id"), ("Set", " ")));
        Assert.Contains($"{At}:RequestHeaderRouteValue: 'x a' is not a valid token (RFC 9110 §5.6.2).",
            Validate(("RequestHeaderRouteValue", "x a"), ("Set", "tenant")));
    }

    [Fact]
    public void Validate_ClientCert_BadHeaderOrExtraKey_ErrorNamesTheKey()
    {
        Assert.Contains($"{At}:ClientCert: 'X Cert' is not a valid token (RFC 9110 §5.6.2).", Validate(("ClientCert", "X Cert")));
        Assert.Contains($"{At}: unexpected key(s) 'Set' for transform 'ClientCert'.", Validate(("ClientCert", "X-Cert"), ("Set", "1")));
    }
}
