// Package cache is rackpool's tiered memcached-compatible cache.
//
// It keeps items in local memory under an LRU policy and, when local memory
// is full, appends the least recently used item to a remote tier — a log in
// pooled memory on a region leased from a memory node — instead of dropping
// it (the composable-rack paper's tiered cache, §9). A local hash table
// indexes both tiers; a GET checks local memory, then the remote log; an
// item lives in exactly one place.
//
// # Protocols
//
// Serve speaks memcached's text protocol (get/gets/gat/gats, set, add,
// replace, append, prepend, cas, delete, incr/decr, touch, flush_all,
// stats, version, verbosity, quit, noreply) and the meta protocol (mg, ms,
// md, ma, mn, me) with memcached 1.6's replies and error strings, and the
// binary protocol (a connection whose first byte is 0x80; get/getk/getq,
// set/add/replace and their quiet forms, delete, incr/decr, append/prepend,
// touch/gat, flush, noop, version, stat, quit) for older clients. Commands
// are read through a per-connection buffered reader; replies are gathered
// and written with one vectored write per batch of pipelined commands (when
// the connection must wait for more of a command, as memcached writes
// before it waits for input), large values by reference, never copied.
//
// # Local tier
//
// Items are spread over power-of-two shards, each a map and an LRU list
// under one mutex. Every access takes a tick from a global counter and each
// shard publishes the tick of its LRU tail, so the evictor finds the
// globally least recently used item without taking every lock. An item costs
// its key, its value and a fixed overhead (the item struct and its map
// slot); the index entry of a remote item costs the overhead and its key.
// Both count against Options.LocalMemory.
//
// # Remote tier
//
// The remote region is a ring of equal segments (about 16, at most 4 MiB
// each, each able to hold the largest record). Evicted items are appended at
// the head as records:
//
//	off size field
//	  0    4 magic "RPC1"
//	  4    2 key length
//	  6    2 reserved
//	  8    4 value length
//	 12    4 client flags
//	 16    8 exptime (unix seconds; informational, the index is authoritative)
//	 24    8 CAS at spill time (informational)
//	 32    4 CRC32-C of key+value
//	 36    4 CRC32-C of the header bytes 0..35
//	 40    - key, then value
//
// The index entry keeps the segment, offset, value length and data CRC, and
// the item's metadata (flags, exptime, CAS), which commands such as touch
// change in the index only.
//
// An eviction does not block other clients: under the shard lock the victim
// leaves the LRU and is marked in flight (GETs keep being served from its
// bytes); the remote write happens under the log's own lock only; then the
// index entry is installed, unless the key was changed or deleted meanwhile,
// in which case the record is dead on arrival.
//
// When the head segment is full, the head moves to the segment with the
// fewest live bytes (the oldest among equals), which is cleaned first. If
// its live records take at most half of it, they are read back, verified
// and compacted to its start (they become the newest records) and their
// index entries updated; otherwise — every segment is more than half live —
// they are dropped: true eviction from the remote tier. Segment rewrites hold the segment's lock exclusively and
// bump its generation, and readers hold it shared, so a read never sees a
// half-rewritten segment and a reader holding a stale offset looks the key
// up again.
//
// A remote read verifies magic, header CRC, key, lengths and the data CRC
// against the index entry; any mismatch drops the entry and is a miss, so a
// GET never returns a wrong value.
//
// # Failures
//
// A remote read or write error marks the tier failed: one log line, every
// remote index entry dropped (its items become misses), evictions drop like
// plain memcached. Local items are still served. After a second, an
// eviction tries the remote again; when the write succeeds the tier is
// healthy again (logged once) with an empty log. SetRemote attaches a new
// region at run time and drops the old index.
package cache
