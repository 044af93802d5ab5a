global using System.Buffers;
global using System.IO.Pipelines;
global using System.Net;
global using Microsoft.AspNetCore.Connections;
global using Microsoft.AspNetCore.Http;
global using Microsoft.AspNetCore.Http.Features;
global using Proxy.Protocols;
