package pager

import (
	"errors"
	"fmt"
	"math/bits"
	"os"
	"time"
)

// Errors of the pager. A failure of the pager wraps ErrFailed and, where the
// memnode said why, the memory package's sentinel (memory.ErrRevoked,
// memory.ErrExpired, memory.ErrClosed, memory.ErrNodeRestarted, ...).
var (
	// ErrFailed means the pager stopped serving faults: the memnode refused
	// a request, did not answer within Options.IOTimeout, or the helper
	// process died. The region is dead from then on (see Pager.Access).
	ErrFailed = errors.New("pager: failed")
	// ErrClosed means the pager was closed.
	ErrClosed = errors.New("pager: closed")
	// ErrUnsupported means this kernel or system cannot page through
	// userfaultfd (not Linux, no userfaultfd, or no write-protect faults
	// on shared memory).
	ErrUnsupported = errors.New("pager: userfaultfd paging not supported here")
)

// Options configures a pager. The zero value of each optional field means
// its default.
type Options struct {
	// Size is the region's length in bytes: a positive multiple of the
	// page size (os.Getpagesize).
	Size int64
	// Local is the local memory budget: the most bytes of the region
	// resident at once. A positive multiple of the page size, at most Size.
	Local int64
	// Endpoint and Token reach the lease backing the region: a memnode
	// address and a capability token with read and write rights for a
	// lease of at least Offset+Size bytes. With MapSocket, Endpoint may be
	// empty.
	Endpoint string
	Token    string
	// MapSocket, when set, is the local socket of a memnode on this
	// machine that maps leases (memnode --map-socket; a lease's MapSocket
	// when its host may map it). The helper then maps the lease into its
	// own memory (memory.Map) and serves faults and writebacks with copies
	// to and from the mapping, with no request to the memnode; Endpoint
	// is not used. A lease the memnode discards (revoked, expired, node
	// restarted or gone) fails the pager as a refused request does.
	MapSocket string
	// Offset is where the region starts within the lease.
	Offset uint64
	// Prefetch is the number of pages a fault brings in: the aligned
	// group of Prefetch pages around the faulting one (pages of the group
	// already resident are skipped). A power of two from 1 to 256; 0
	// means DefaultPrefetch. It is capped at the local budget.
	Prefetch int
	// IOTimeout bounds each memnode request; a request that takes longer
	// fails the pager. 0 means 10s.
	IOTimeout time.Duration
	// HelperArgs are the arguments the fault-handling helper process is
	// started with: the running executable is started again with them and
	// with HelperEnv in its environment, and must then call RunHelper (see
	// IsHelper). Nil means no arguments.
	HelperArgs []string
	// HelperStderr receives the helper's standard error; nil means the
	// caller's os.Stderr.
	HelperStderr *os.File
}

// DefaultPrefetch is the number of pages a fault brings in by default.
const DefaultPrefetch = 8

const maxPrefetch = 256

// Validate reports whether the options can make a pager.
func (o Options) Validate() error {
	ps := int64(os.Getpagesize())
	switch {
	case o.Size <= 0:
		return fmt.Errorf("pager: region size %d must be positive", o.Size)
	case o.Size%ps != 0:
		return fmt.Errorf("pager: region size %d is not a multiple of the page size %d", o.Size, ps)
	case o.Size/ps > 1<<31:
		return fmt.Errorf("pager: region size %d too large", o.Size)
	case o.Local <= 0:
		return fmt.Errorf("pager: local budget %d must be positive", o.Local)
	case o.Local%ps != 0:
		return fmt.Errorf("pager: local budget %d is not a multiple of the page size %d", o.Local, ps)
	case o.Local > o.Size:
		return fmt.Errorf("pager: local budget %d is larger than the region (%d)", o.Local, o.Size)
	case o.Endpoint == "" && o.MapSocket == "":
		return errors.New("pager: no memnode endpoint")
	case o.Token == "":
		return errors.New("pager: no token")
	case o.Prefetch < 0 || o.Prefetch > maxPrefetch || bits.OnesCount(uint(o.Prefetch)) > 1:
		return fmt.Errorf("pager: prefetch %d must be 0 or a power of two up to %d pages", o.Prefetch, maxPrefetch)
	case o.IOTimeout < 0:
		return fmt.Errorf("pager: negative I/O timeout %v", o.IOTimeout)
	case o.Offset%uint64(ps) != 0:
		return fmt.Errorf("pager: lease offset %d is not a multiple of the page size %d", o.Offset, ps)
	}
	return nil
}

// LatencyBuckets is the number of buckets of the fault latency histogram.
const LatencyBuckets = 24

// Stats are a pager's counters since it opened.
type Stats struct {
	Faults      uint64 // missing-page faults served
	WriteFaults uint64 // first writes to clean resident pages (write-protect faults)
	Fetches     uint64 // memnode reads
	Fetched     uint64 // bytes read from the memnode
	ZeroFills   uint64 // pages installed as zeros (never written to the pool)
	Prefetched  uint64 // pages installed ahead of a fault on them
	Evictions   uint64 // pages dropped from local memory
	Writebacks  uint64 // dirty pages written to the memnode before being dropped
	Written     uint64 // bytes written to the memnode
	Resident    uint64 // pages resident now
	Budget      uint64 // the local budget in pages
	InFlight    uint64 // missing-page faults being served now
	// Latency counts missing-page faults by the time the helper took to
	// serve them (from reading the fault to having the page ready to
	// install: room made, contents fetched; so without the install and
	// the kernel's wake-ups): bucket 0 is under 1µs, bucket i
	// (i ≥ 1) is [2^(i-1), 2^i) µs, and the last bucket is everything
	// longer.
	Latency [LatencyBuckets]uint64
}

// latencyBucket is the histogram bucket of a fault served in d.
func latencyBucket(d time.Duration) int {
	return min(bits.Len64(uint64(d/time.Microsecond)), LatencyBuckets-1)
}

// LatencyQuantile returns the upper bound of the histogram bucket holding
// the q-quantile (0 < q ≤ 1) of the fault latency, or 0 if no fault was
// served.
func (s Stats) LatencyQuantile(q float64) time.Duration {
	var n uint64
	for _, c := range s.Latency {
		n += c
	}
	if n == 0 {
		return 0
	}
	want := uint64(q*float64(n) + 0.5)
	want = max(want, 1)
	var seen uint64
	for i, c := range s.Latency {
		seen += c
		if seen >= want {
			return time.Duration(uint64(1)<<i) * time.Microsecond
		}
	}
	return time.Duration(uint64(1)<<(LatencyBuckets-1)) * time.Microsecond
}

// HelperEnv is the environment variable that marks the helper process.
const HelperEnv = "RACKPOOL_PAGER_HELPER"

// IsHelper reports whether this process was started by Open as a pager's
// fault-handling helper. A program that opens pagers calls it first thing
// (in main, or TestMain) and, if it is true, runs RunHelper and exits with
// its status:
//
//	if pager.IsHelper() {
//		os.Exit(pager.RunHelper())
//	}
func IsHelper() bool { return os.Getenv(HelperEnv) == "1" }
