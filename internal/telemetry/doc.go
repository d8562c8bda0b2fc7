// Package telemetry keeps what composed hosts, memory leases and caches
// really use, as time series, for the provisioning loop (P0 §8: forecast
// each consumer's demand from its observed usage) and for people (Redfish
// TelemetryService, Prometheus).
//
// # Model
//
// A series is identified by a Key: the kind of source (System,
// MemoryLease, Cache), the source's ID (a system, a lease) and a metric
// from the fixed table of each kind (Metrics: memory_used_bytes,
// bytes_in_use, remote_live_bytes, ...). It holds (time, value) samples,
// oldest first, in a ring that grows as samples arrive up to
// Options.MaxSamples (default 8640: a day at one sample every 10 s), and
// keeps none older than Options.Retention (default 24 h). The number of
// series is bounded by Options.MaxSeries; a sample for a new series beyond
// it is refused with ErrTooManySeries. Since metric names come from a
// fixed table, a source has at most as many series as its kind has
// metrics, whatever its pusher sends.
//
// # Validation
//
// Append and AppendAll check everything before they change anything: a
// push with one bad sample (NaN, infinite or negative value, a time beyond
// Options.MaxSkew in the future or before the retention window, times not
// strictly increasing, an unknown metric) is refused whole with an error
// wrapping one of the sentinels in errors.go, and stores nothing. Samples
// that repeat what a series already holds (same time, same value: a retry
// after a lost answer) are skipped, so pushes are idempotent; a sample at
// or before a series' newest one that is not such a repeat is out of
// order.
//
// # Reading
//
// Window and AppendWindow copy the samples of one series since a time
// (AppendWindow into the caller's slice, so a loop reading 10^4 series per
// step allocates nothing once its buffer has grown); Latest and LatestAll
// give the newest sample of one or many series; Series lists keys. Every
// method is safe for concurrent use: the series map has a reader/writer
// lock, each series its own, and appends are serialised among themselves
// (validation and application of one push see the same state), so readers
// only ever wait for the copy of one series' new samples.
//
// # Persistence
//
// With a store, every push AppendAll accepts is first written as a store
// object of its own, a segment holding the push's new samples (write
// through); a push the store cannot take fails with ErrNotStored and
// changes nothing. Checkpoint (every minute from Run, and at shutdown)
// merges the segments written since the previous checkpoint into one,
// under the first one's ID (the store's ID order is the order segments
// load in, so later pushes still load after it), and deletes the segments
// whose samples have all expired; Open and Reload read the segments back
// in order. Segments are written as intent plans (store.Plan.Intent):
// committed with PostgreSQL, surviving a crash of the process at once with
// SQLite, where they are durable with the next durable commit. So a
// kill -9, of a replica serving alone or of the leader of several, loses
// no acknowledged sample. Options.Buffered instead keeps pushes in memory
// and has Checkpoint write what arrived since the previous one: a kill -9
// then loses up to the last checkpoint interval.
//
// Why segments and not one object per series: a checkpoint then writes
// what arrived since the last one (10^4 series × 6 samples a minute is
// about 800 KB), where rewriting each changed series' object would write
// everything retained (10^4 × up to 8640 samples, over a gigabyte a
// minute), and one object per series per checkpoint would leave millions
// of rows. The cost is at start-up: all retained segments are read at once
// (the size of the retained samples, about 13 bytes each).
//
// The segment encoding (version 1) is:
//
//	"RPTS" 1 (version byte)
//	uvarint series count, then per series:
//	  uvarint length + kind, uvarint length + source, uvarint length + metric
//	  uvarint sample count (≥ 1)
//	  varint first time (Unix ns), 8 bytes value (IEEE 754, big-endian)
//	  then per further sample: uvarint time delta (ns, > 0), 8 bytes value
package telemetry
