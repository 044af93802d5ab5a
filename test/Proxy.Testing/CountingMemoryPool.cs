using System.Buffers;

namespace Proxy.Testing;

// Shared: rents and their counts come from any thread (Interlocked).
/// <summary>
/// A memory pool for tests of how a pipe asks for blocks: it rents exactly what is asked for (at least 256 bytes, the
/// smallest block of the stream pools), up to <see cref="MaxBufferSize"/>, and counts the bytes and the blocks below
/// 1 KiB. A pipe asks <see cref="ArrayPool{T}.Shared"/> instead for more than <see cref="MaxBufferSize"/>, which this
/// pool then never sees.
/// </summary>
public sealed class CountingMemoryPool(int maxBufferSize) : MemoryPool<byte>
{
    private long _rentedBytes;
    private int _rents;
    private int _smallRents;

    /// <summary>Bytes of every block rented so far.</summary>
    public long RentedBytes => Interlocked.Read(ref _rentedBytes);

    /// <summary>Blocks rented so far.</summary>
    public int Rents => Volatile.Read(ref _rents);

    /// <summary>Blocks of less than 1 KiB rented so far.</summary>
    public int SmallRents => Volatile.Read(ref _smallRents);

    public override int MaxBufferSize => maxBufferSize;

    public override IMemoryOwner<byte> Rent(int minBufferSize = -1)
    {
        var size = minBufferSize <= 0 ? maxBufferSize : Math.Max(256, minBufferSize);
        Interlocked.Add(ref _rentedBytes, size);
        Interlocked.Increment(ref _rents);
        if (size < 1024)
        {
            Interlocked.Increment(ref _smallRents);
        }
        return new Owner(new byte[size]);
    }

    protected override void Dispose(bool disposing)
    {
    }

    private sealed class Owner(byte[] array) : IMemoryOwner<byte>
    {
        public Memory<byte> Memory => array;

        public void Dispose()
        {
        }
    }
}
