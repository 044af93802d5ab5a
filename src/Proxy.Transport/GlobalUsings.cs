global using System.Buffers;
global using System.IO.Pipelines;
global using System.Net;
global using Microsoft.AspNetCore.Connections;
