package cache

import (
	"sync/atomic"

	"rackpool/internal/netserve"
)

// Stats is a snapshot of the cache's counters. Counters are cumulative since
// New; gauges (Curr*, Local*, Remote*Items/Bytes, IndexBytes) are current.
type Stats struct {
	CurrConnections  int64
	TotalConnections int64
	BytesRead        int64
	BytesWritten     int64

	CmdGet, CmdSet, CmdTouch, CmdFlush, CmdMeta int64
	GetHits, GetMisses, GetExpired, GetFlushed  int64
	DeleteHits, DeleteMisses                    int64
	IncrHits, IncrMisses, DecrHits, DecrMisses  int64
	CasHits, CasMisses, CasBadval               int64
	TouchHits, TouchMisses                      int64
	StoreTooLarge, StoreNoMemory                int64
	TotalItems                                  int64 // items stored since start

	LimitBytes int64 // LocalMemory (cache_memlimit may change it)
	UsedBytes  int64 // bytes charged against LimitBytes: local items plus index entries

	LocalItems int64 // items held in local memory
	LocalBytes int64 // their charged bytes (key, value, overhead)

	RemoteItems int64 // items indexed in the remote tier (including writes in flight)
	RemoteBytes int64 // their record bytes in the remote log
	IndexBytes  int64 // local bytes charged for their index entries

	RemoteAttached  bool  // a remote tier is attached
	RemoteHealthy   bool  // ... and not failed
	RemoteHits      int64 // GETs served from the remote tier
	RemoteReadBytes int64 // record bytes read from the remote tier to serve them
	RemoteMisses    int64 // remote lookups that found a moved-away or bad record
	RemoteErrors    int64 // failed remote reads and writes
	RemoteCorrupt   int64 // records that failed verification (dropped, never served)

	Evictions       int64 // items dropped for space (local without spill, or from the remote log)
	Reclaimed       int64 // expired or flushed items removed while looking for space
	Spills          int64 // local victims written to the remote log
	SpillDrops      int64 // local victims dropped because the remote tier was unavailable or too small
	Promotions      int64 // remote hits moved back to local memory
	Compactions     int64 // remote segments compacted (live records copied forward)
	CompactedItems  int64 // records copied forward by compaction
	RemoteEvictions int64 // remote records dropped because their segment was mostly live
	// RemoteEvictedBytes is the record bytes of those: with the live bytes,
	// what the remote tier would have held had it been larger (the working
	// set `cache --remote-memory auto` sizes its lease for).
	RemoteEvictedBytes int64
	// RemoteMoves counts remote tiers replaced by MoveRemote; RemoteMoved
	// and RemoteMoveDrops the records moved to the new tier and those lost.
	RemoteMoves, RemoteMoved, RemoteMoveDrops int64
}

// globalStats are counters updated outside shard locks.
type globalStats struct {
	currConns, totalConns      atomic.Int64
	bytesRead, bytesWritten    atomic.Int64
	cmdFlush, cmdMeta          atomic.Int64
	storeTooLarge              atomic.Int64
	remoteHits, remoteMisses   atomic.Int64
	remoteReadBytes            atomic.Int64
	remoteErrors, corrupt      atomic.Int64
	spills, spillDrops         atomic.Int64
	promotions                 atomic.Int64
	compactions, compactedRecs atomic.Int64
	remoteEvictions            atomic.Int64
	remoteEvictedBytes         atomic.Int64
	remoteMoves, remoteMoved   atomic.Int64
	remoteMoveDrops            atomic.Int64
	evictions, reclaimed       atomic.Int64
}

// shardStats are counters and gauges guarded by the shard lock.
type shardStats struct {
	cmdGet, cmdSet, cmdTouch   int64
	getHits, getMisses         int64
	getExpired, getFlushed     int64
	deleteHits, deleteMisses   int64
	incrHits, incrMisses       int64
	decrHits, decrMisses       int64
	casHits, casMisses, casBad int64
	touchHits, touchMisses     int64
	storeNoMemory, totalItems  int64

	localItems, localBytes   int64
	remoteItems, remoteBytes int64
	indexBytes               int64
}

// Stats returns a snapshot of the cache's counters.
func (c *Cache) Stats() Stats {
	var s Stats
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.Lock()
		t := sh.st
		sh.mu.Unlock()
		s.CmdGet += t.cmdGet
		s.CmdSet += t.cmdSet
		s.CmdTouch += t.cmdTouch
		s.GetHits += t.getHits
		s.GetMisses += t.getMisses
		s.GetExpired += t.getExpired
		s.GetFlushed += t.getFlushed
		s.DeleteHits += t.deleteHits
		s.DeleteMisses += t.deleteMisses
		s.IncrHits += t.incrHits
		s.IncrMisses += t.incrMisses
		s.DecrHits += t.decrHits
		s.DecrMisses += t.decrMisses
		s.CasHits += t.casHits
		s.CasMisses += t.casMisses
		s.CasBadval += t.casBad
		s.TouchHits += t.touchHits
		s.TouchMisses += t.touchMisses
		s.StoreNoMemory += t.storeNoMemory
		s.TotalItems += t.totalItems
		s.LocalItems += t.localItems
		s.LocalBytes += t.localBytes
		s.RemoteItems += t.remoteItems
		s.RemoteBytes += t.remoteBytes
		s.IndexBytes += t.indexBytes
	}
	g := &c.st
	s.CurrConnections = g.currConns.Load()
	s.TotalConnections = g.totalConns.Load()
	c.bytesMu.Lock()
	s.BytesRead = g.bytesRead.Load()
	c.net.Conns(func(tc *netserve.Conn[*conn]) { s.BytesRead += tc.State.cr.n.Load() })
	c.bytesMu.Unlock()
	s.BytesWritten = g.bytesWritten.Load()
	s.CmdFlush = g.cmdFlush.Load()
	s.CmdMeta = g.cmdMeta.Load()
	s.StoreTooLarge = g.storeTooLarge.Load()
	s.RemoteHits = g.remoteHits.Load()
	s.RemoteReadBytes = g.remoteReadBytes.Load()
	s.RemoteMisses = g.remoteMisses.Load()
	s.RemoteErrors = g.remoteErrors.Load()
	s.RemoteCorrupt = g.corrupt.Load()
	s.Spills = g.spills.Load()
	s.SpillDrops = g.spillDrops.Load()
	s.Promotions = g.promotions.Load()
	s.Compactions = g.compactions.Load()
	s.CompactedItems = g.compactedRecs.Load()
	s.RemoteEvictions = g.remoteEvictions.Load()
	s.RemoteEvictedBytes = g.remoteEvictedBytes.Load()
	s.RemoteMoves, s.RemoteMoved, s.RemoteMoveDrops = g.remoteMoves.Load(), g.remoteMoved.Load(), g.remoteMoveDrops.Load()
	s.Evictions = g.evictions.Load() + s.RemoteEvictions
	s.Reclaimed = g.reclaimed.Load()
	s.LimitBytes = c.limit.Load()
	s.UsedBytes = c.used.Load()
	if t := c.tier.Load(); t != nil {
		s.RemoteAttached = true
		s.RemoteHealthy = t.state.Load() == tierHealthy
	}
	return s
}

// statsBaseline is what `stats reset` saw. memcached's `stats reset` zeroes
// its counters (total and per slab class: commands, hits and misses,
// evictions, reclaims, bytes read and written, connections and items
// since start), not its gauges (items, bytes, connections now, pages);
// rackpool's stats commands report its counters less this baseline, so
// they read the same, while Stats, which the remote tier's sizer and the
// usage reporter take differences of, stays cumulative since New.
type statsBaseline struct {
	s   Stats
	cls [maxSlabClasses]classCounters
}

// resetStats is memcached's `stats reset` (text and binary).
func (c *Cache) resetStats() {
	b := &statsBaseline{s: c.Stats()}
	for i := range c.classes {
		b.cls[i] = c.classes[i].counters()
	}
	c.statsBase.Store(b)
	c.detail.clear()
}

// reportedStats is Stats with its counters counted from the last stats
// reset.
func (c *Cache) reportedStats() Stats {
	s := c.Stats()
	if b := c.statsBase.Load(); b != nil {
		s.since(&b.s)
	}
	return s
}

// since subtracts the counters of b (an earlier snapshot) from s, leaving
// the gauges alone.
func (s *Stats) since(b *Stats) {
	for _, f := range [...]struct {
		v *int64
		b int64
	}{
		{&s.TotalConnections, b.TotalConnections}, {&s.BytesRead, b.BytesRead}, {&s.BytesWritten, b.BytesWritten},
		{&s.CmdGet, b.CmdGet}, {&s.CmdSet, b.CmdSet}, {&s.CmdTouch, b.CmdTouch}, {&s.CmdFlush, b.CmdFlush}, {&s.CmdMeta, b.CmdMeta},
		{&s.GetHits, b.GetHits}, {&s.GetMisses, b.GetMisses}, {&s.GetExpired, b.GetExpired}, {&s.GetFlushed, b.GetFlushed},
		{&s.DeleteHits, b.DeleteHits}, {&s.DeleteMisses, b.DeleteMisses},
		{&s.IncrHits, b.IncrHits}, {&s.IncrMisses, b.IncrMisses}, {&s.DecrHits, b.DecrHits}, {&s.DecrMisses, b.DecrMisses},
		{&s.CasHits, b.CasHits}, {&s.CasMisses, b.CasMisses}, {&s.CasBadval, b.CasBadval},
		{&s.TouchHits, b.TouchHits}, {&s.TouchMisses, b.TouchMisses},
		{&s.StoreTooLarge, b.StoreTooLarge}, {&s.StoreNoMemory, b.StoreNoMemory}, {&s.TotalItems, b.TotalItems},
		{&s.RemoteHits, b.RemoteHits}, {&s.RemoteReadBytes, b.RemoteReadBytes}, {&s.RemoteMisses, b.RemoteMisses},
		{&s.RemoteErrors, b.RemoteErrors}, {&s.RemoteCorrupt, b.RemoteCorrupt},
		{&s.Evictions, b.Evictions}, {&s.Reclaimed, b.Reclaimed}, {&s.Spills, b.Spills}, {&s.SpillDrops, b.SpillDrops},
		{&s.Promotions, b.Promotions}, {&s.Compactions, b.Compactions}, {&s.CompactedItems, b.CompactedItems},
		{&s.RemoteEvictions, b.RemoteEvictions}, {&s.RemoteEvictedBytes, b.RemoteEvictedBytes},
		{&s.RemoteMoves, b.RemoteMoves}, {&s.RemoteMoved, b.RemoteMoved}, {&s.RemoteMoveDrops, b.RemoteMoveDrops},
	} {
		*f.v -= f.b
	}
}
