using System.Security.Claims;
using System.Text.Encodings.Web;
using System.Threading.RateLimiting;
using Microsoft.AspNetCore.Authentication;
using Microsoft.AspNetCore.Authorization;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Http;
using Microsoft.AspNetCore.Http.Timeouts;
using Microsoft.AspNetCore.RateLimiting;
using Microsoft.Extensions.Configuration;
using Microsoft.Extensions.DependencyInjection;
using Microsoft.Extensions.Logging;
using Microsoft.Extensions.Options;

namespace Proxy.Forwarding.Tests.Infrastructure;

/// <summary>
/// A proxy app set up the way a YARP user sets one up for route policies: the app registers its authorization, CORS, rate
/// limiter, output cache and request timeout policies and adds their middleware; routes only name them.
/// </summary>
public static class PolicyApps
{
    public const string Scheme = "Header";

    /// <summary>Names of the policies <see cref="StartAsync"/> registers.</summary>
    public const string Admins = "admins", Partners = "partners", OnePerHour = "one-per-hour", Cached = "cached", Short = "short";

    public const string PartnerOrigin = "https://partner.example", DefaultOrigin = "https://default.example";

    /// <summary>The body the <see cref="Short"/> timeout policy writes: proof that the middleware, not the forwarder, answered.</summary>
    public const string TimeoutBody = "timed out by policy";

    public static Task<TestApp> StartAsync(ProxyConfigDictionary config, bool fallbackRequiresUser = false) =>
        ProxyTestHost.StartProxyAsync(
            b =>
            {
                b.Configuration.AddInMemoryCollection(config);
                AddPolicies(b.Services, fallbackRequiresUser);
                b.Services.AddProxyForwarding().LoadFromConfig(b.Configuration.GetSection("ReverseProxy"));
            },
            app =>
            {
                app.UseRouting();
                app.UseCors();
                app.UseAuthentication();
                app.UseAuthorization();
                app.UseRateLimiter();
                app.UseRequestTimeouts();
                app.UseOutputCache();
                app.MapProxyForwarding();
            });

    public static void AddPolicies(IServiceCollection services, bool fallbackRequiresUser = false)
    {
        services.AddAuthentication(Scheme).AddScheme<AuthenticationSchemeOptions, HeaderAuthenticationHandler>(Scheme, null);
        services.AddAuthorization(o =>
        {
            o.AddPolicy(Admins, p => p.RequireAuthenticatedUser().RequireRole("admin"));
            if (fallbackRequiresUser)
            {
                o.FallbackPolicy = new AuthorizationPolicyBuilder().RequireAuthenticatedUser().Build();
            }
        });
        services.AddCors(o =>
        {
            o.AddPolicy(Partners, p => p.WithOrigins(PartnerOrigin).WithMethods("GET", "PUT"));
            o.AddDefaultPolicy(p => p.WithOrigins(DefaultOrigin));
        });
        services.AddRateLimiter(o =>
        {
            o.RejectionStatusCode = StatusCodes.Status429TooManyRequests;
            // An hour-long window: the second request is refused whatever the machine's speed.
            o.AddFixedWindowLimiter(OnePerHour, w => (w.PermitLimit, w.Window, w.QueueLimit) = (1, TimeSpan.FromHours(1), 0));
        });
        services.AddOutputCache(o => o.AddPolicy(Cached, p => p.Expire(TimeSpan.FromHours(1))));
        services.AddRequestTimeouts(o => o.AddPolicy(Short, new RequestTimeoutPolicy
        {
            Timeout = TimeSpan.FromMilliseconds(200),
            WriteTimeoutResponse = context => context.Response.WriteAsync(TimeoutBody),
        }));
    }

    /// <summary>
    /// A backend that counts its requests: a path ending in <c>/hang</c> never answers (until aborted), anything else answers
    /// "request N, body B bytes".
    /// </summary>
    public static Task<TestApp> StartCountingBackendAsync()
    {
        var count = 0;
        return ProxyTestHost.StartBackendAsync(app => app.Run(async context =>
        {
            if (context.Request.Path.Value?.EndsWith("/hang", StringComparison.Ordinal) == true)
            {
                await Task.Delay(Timeout.Infinite, context.RequestAborted);
            }

            var body = await new StreamReader(context.Request.Body).ReadToEndAsync(context.RequestAborted);
            await context.Response.WriteAsync($"request {Interlocked.Increment(ref count)}, body {body.Length} bytes", context.RequestAborted);
        }));
    }
}

/// <summary>Authenticates from <c>x-user</c> (the name) and <c>x-role</c> (roles); no header, no identity.</summary>
public sealed class HeaderAuthenticationHandler(IOptionsMonitor<AuthenticationSchemeOptions> options, ILoggerFactory logger, UrlEncoder encoder)
    : AuthenticationHandler<AuthenticationSchemeOptions>(options, logger, encoder)
{
    protected override Task<AuthenticateResult> HandleAuthenticateAsync()
    {
        if (Request.Headers["x-user"].ToString() is not { Length: > 0 } user)
        {
            return Task.FromResult(AuthenticateResult.NoResult());
        }

        var claims = new List<Claim> { new(ClaimTypes.Name, user) };
        claims.AddRange(Request.Headers["x-role"].Select(role => new Claim(ClaimTypes.Role, role!)));
        var principal = new ClaimsPrincipal(new ClaimsIdentity(claims, Scheme.Name));
        return Task.FromResult(AuthenticateResult.Success(new AuthenticationTicket(principal, Scheme.Name)));
    }
}
