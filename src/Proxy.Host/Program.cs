// The standalone proxy. `dotnet run --project src/Proxy.Host` serves the bundled proxy.json and its demo
// backends; `--config FILE` uses your routes instead. See README.md, "Configuration reference".
Proxy.Host.SocketEngineDefaults.PreferInlineCompletions(); // before any socket exists
return await Proxy.Host.ProxyHostApp.RunAsync(args);
