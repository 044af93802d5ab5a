namespace Proxy.Protocols.Http2;

internal sealed partial class FrameWriterLoop
{
    /// <summary>
    /// Counts bytes written since the last flush so the loop can batch up to MaxWriteBatchSize, and batches the
    /// transport's Advance: frames are written into one memory block from the transport and the block is advanced
    /// once, when it is full or before a flush, instead of once per frame header and per payload copy.
    /// </summary>
    /// <remarks>
    /// NOTE: bytes written here reach the transport only at <see cref="Commit"/>; every flush of
    /// <see cref="Inner"/> must commit first (FlushAsync does). The block stays valid until the transport's own
    /// Advance or flush, both of which only this writer calls.
    /// </remarks>
    // Owned by the frame-writer loop.
    private sealed class CountingBufferWriter : IBufferWriter<byte>
    {
        private Memory<byte> _block;
        private int _buffered;

        public CountingBufferWriter(PipeWriter inner) => Inner = inner;

        public PipeWriter Inner { get; }
        public long Unflushed { get; set; }
        /// <summary>Frames written since the last flush (for the writer.batch.frames histogram).</summary>
        public int Frames { get; set; }

        public void Advance(int count)
        {
            ArgumentOutOfRangeException.ThrowIfNegative(count);
            ArgumentOutOfRangeException.ThrowIfGreaterThan(count, _block.Length - _buffered);
            _buffered += count;
            Unflushed += count;
        }

        public Memory<byte> GetMemory(int sizeHint = 0) => Reserve(sizeHint);

        public Span<byte> GetSpan(int sizeHint = 0) => Reserve(sizeHint).Span;

        /// <summary>Hands what was written to the transport (one Advance); call before flushing it.</summary>
        public void Commit()
        {
            if (_buffered > 0)
            {
                Inner.Advance(_buffered);
            }
            _buffered = 0;
            _block = default;
        }

        private Memory<byte> Reserve(int sizeHint)
        {
            var free = _block.Length - _buffered;
            if (free == 0 || free < sizeHint)
            {
                Commit();
                _block = Inner.GetMemory(sizeHint);
                free = _block.Length;
            }
            return _block.Slice(_buffered, free);
        }
    }
}
