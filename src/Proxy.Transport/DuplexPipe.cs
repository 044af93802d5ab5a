namespace Proxy.Transport;

/// <summary>An <see cref="IDuplexPipe"/> made of an existing reader and writer.</summary>
public sealed class DuplexPipe(PipeReader input, PipeWriter output) : IDuplexPipe
{
    public PipeReader Input { get; } = input;
    public PipeWriter Output { get; } = output;

    /// <summary>Two cross-connected pipes: what one side writes the other reads.</summary>
    public static (DuplexPipe Left, DuplexPipe Right) CreatePair(PipeOptions? leftToRight = null, PipeOptions? rightToLeft = null)
    {
        var a = new Pipe(leftToRight ?? PipeOptions.Default);
        var b = new Pipe(rightToLeft ?? PipeOptions.Default);
        return (new DuplexPipe(b.Reader, a.Writer), new DuplexPipe(a.Reader, b.Writer));
    }
}
