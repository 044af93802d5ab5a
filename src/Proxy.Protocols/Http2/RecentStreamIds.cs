namespace Proxy.Protocols.Http2;

/// <summary>A set of the last <c>capacity</c> stream ids added; older ids are forgotten, so memory stays bounded.</summary>
// Owned by the read loop.
internal sealed class RecentStreamIds
{
    private readonly HashSet<int> _ids = new();
    private readonly Queue<int> _order = new();
    private readonly int _capacity;

    public RecentStreamIds(int capacity) => _capacity = Math.Max(1, capacity);

    public bool Contains(int streamId) => _ids.Contains(streamId);

    public void Add(int streamId)
    {
        if (!_ids.Add(streamId))
        {
            return;
        }
        _order.Enqueue(streamId);
        if (_order.Count > _capacity)
        {
            _ids.Remove(_order.Dequeue());
        }
    }
}
