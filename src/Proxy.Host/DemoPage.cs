using System.Net;

namespace Proxy.Host;

/// <summary>
/// The demo's first page (GET / on the bundled config): the demo's events, live in the browser through the proxy with
/// EventSource, and a link to the admin dashboard.
/// </summary>
internal static class DemoPage
{
    /// <summary>The page; <paramref name="dashboard"/> is the admin endpoint (null when it is off).</summary>
    public static string Render(Uri? dashboard)
    {
        var link = dashboard is null
            ? "<span id=\"dashboard\">The admin dashboard is off (Admin:Enabled=false).</span>"
            : $"<a id=\"dashboard\" href=\"{WebUtility.HtmlEncode(dashboard.ToString())}\">Open the dashboard</a> (admin endpoint, {WebUtility.HtmlEncode(dashboard.ToString())})";
        return Template.Replace("{{dashboard}}", link, StringComparison.Ordinal);
    }

    private const string Template = """
        <!doctype html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <title>Proxy demo</title>
        <style>
          body { margin: 0; padding: 24px; font: 15px/1.5 system-ui, sans-serif; background: #0f1419; color: #d8e0e8; }
          a { color: #58a6ff; }
          h1 { font-size: 20px; margin: 0 0 8px; }
          .muted { color: #8a98a8; }
          #state { display: inline-block; padding: 1px 8px; border-radius: 8px; background: #2a3642; font-size: 12px; }
          #state.open { background: #1f3a28; color: #3fb950; }
          ol { font-family: ui-monospace, monospace; font-size: 13px; padding-left: 24px; }
        </style>
        </head>
        <body>
        <h1>Proxy demo</h1>
        <p class="muted">This page came from the demo SSE backend through the proxy. Below, its <code>/events</code> stream arrives
        live, through the proxy too, one event a second. gRPC: the echo service <code>proxy.interop.Echo</code> on the same address.</p>
        <p>{{dashboard}}</p>
        <p>Events received: <strong id="count">0</strong> <span id="state">connecting</span></p>
        <ol id="events" reversed></ol>
        <script>
        "use strict";
        const list = document.getElementById("events");
        const count = document.getElementById("count");
        const state = document.getElementById("state");
        let received = 0;
        // EventSource resumes by itself after a drop, sending Last-Event-ID; the demo continues from there.
        const source = new EventSource("/events");
        source.onopen = () => { state.textContent = "open"; state.className = "open"; };
        source.onerror = () => { state.textContent = "reconnecting"; state.className = ""; };
        source.onmessage = e => {
          received++;
          count.textContent = received;
          const item = document.createElement("li");
          item.textContent = "id " + e.lastEventId + ": " + e.data;
          list.prepend(item);
          while (list.children.length > 20) list.lastChild.remove();
        };
        </script>
        </body>
        </html>
        """;
}
