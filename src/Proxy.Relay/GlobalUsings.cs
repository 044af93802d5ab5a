global using System.Buffers;
global using System.IO.Pipelines;
