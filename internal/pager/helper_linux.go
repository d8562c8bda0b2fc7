//go:build linux && (amd64 || arm64 || riscv64 || loong64)

package pager

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"rackpool/internal/memory"
)

// Descriptors the helper inherits (os/exec ExtraFiles start at 3).
const (
	helperUffdFD  = 3
	helperMemFD   = 4
	helperCtlFD   = 5
	maxFaultBatch = 64 // fault messages read at once
	maxWriteRun   = 64 // pages per writeback request
	maxWriters    = 16 // writeback requests in flight
	// mapCheckEvery is how often a helper serving from a mapped lease
	// asks the memnode whether the lease still stands (see watch).
	mapCheckEvery = time.Second
)

// Page flags.
const (
	fResident = 1 << iota // installed in the region
	fDirty                // written since it was installed
	fRef                  // CLOCK reference bit
	fInPool               // the memnode holds the page's contents
	fVictim               // chosen for eviction in the current round
	fWanted               // to be installed by the current chunk
)

// helper serves one pager's faults. Only the fault goroutine touches the
// page state; the control goroutine reads the counters.
type helper struct {
	cfg      helperConfig
	ps       int // page size
	pages    int
	prefetch int
	ctl      *net.UnixConn
	mc       *memory.Client  // the memnode over TCP; nil when mp is set
	mp       *memory.Mapping // the lease mapped into this process (Options.MapSocket); nil over TCP

	// With a mapped lease, sums holds a hash of each page the pool holds
	// (fInPool), checked when the page comes back: a lease the memnode
	// discarded (revoked, expired, node restarted) reads zeros through
	// the mapping, and that must fail the pager, not be installed.
	sums []uint32
	seed maphash.Seed

	state   []uint8
	frames  []int32 // page held by each frame of the local budget, -1 if none
	frameOf []int32 // frame of each resident page
	free    []int32 // free frames
	hand    int     // CLOCK hand over frames
	failed  atomic.Bool

	zero  []byte
	wbuf  []byte // writeback staging, maxWriters*maxWriteRun pages
	bufs  [][]byte
	msgs  []byte
	stats helperStats
}

type helperStats struct {
	faults, writeFaults, fetches, fetched, zeroFills, prefetched atomic.Uint64
	evictions, writebacks, written, resident, inFlight           atomic.Uint64
	latency                                                      [LatencyBuckets]atomic.Uint64
}

// RunHelper serves the faults of the pager that started this process (see
// IsHelper) until that pager closes, and returns the process's exit
// status. The helper is a separate process so that serving a fault never
// waits on the faulting program's Go runtime (see the package
// documentation).
func RunHelper() int {
	f := os.NewFile(helperCtlFD, "pager-control")
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		fmt.Fprintln(os.Stderr, "pager helper: control socket:", err)
		return 2
	}
	ctl := c.(*net.UnixConn)
	buf := make([]byte, 64<<10)
	n, err := ctl.Read(buf)
	if err != nil || n < 1 || buf[0] != msgConfig {
		fmt.Fprintln(os.Stderr, "pager helper: no configuration:", err)
		return 2
	}
	var cfg helperConfig
	if err := json.Unmarshal(buf[1:n], &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "pager helper: configuration:", err)
		return 2
	}
	h := newHelper(cfg, ctl)
	if err := h.connect(); err != nil {
		ctl.Write(encodeError(err))
		return 1
	}
	if _, err := ctl.Write([]byte{msgReady}); err != nil {
		return 1
	}
	go h.control()
	if h.mp != nil {
		go h.watch()
	}
	h.serve()
	return 1
}

func newHelper(cfg helperConfig, ctl *net.UnixConn) *helper {
	ps := os.Getpagesize()
	h := &helper{cfg: cfg, ps: ps, pages: int(cfg.Size / int64(ps)), ctl: ctl}
	nframes := int(cfg.Local / int64(ps))
	h.prefetch = min(cfg.Prefetch, nframes)
	for h.prefetch&(h.prefetch-1) != 0 { // keep a power of two
		h.prefetch &= h.prefetch - 1
	}
	h.state = make([]uint8, h.pages)
	h.frameOf = make([]int32, h.pages)
	h.frames = make([]int32, nframes)
	h.free = make([]int32, nframes)
	for i := range h.frames {
		h.frames[i] = -1
		h.free[i] = int32(nframes - 1 - i)
	}
	h.zero = make([]byte, max(h.prefetch, zeroWindow)*ps)
	h.wbuf = make([]byte, maxWriters*maxWriteRun*ps)
	h.msgs = make([]byte, maxFaultBatch*uffdMsgSize)
	if cfg.MapSocket != "" {
		h.sums = make([]uint32, h.pages)
		h.seed = maphash.MakeSeed()
	}
	return h
}

// connect reaches the lease: mapped through the memnode's local socket
// when the pager was given one, over TCP otherwise.
func (h *helper) connect() error {
	if h.cfg.MapSocket != "" {
		return h.connectMapped()
	}
	return h.connectTCP()
}

// connectMapped maps the lease and checks it as connectTCP does: large
// enough, and writable (the mapping refuses an empty write without the
// write right).
func (h *helper) connectMapped() error {
	ctx, cancel := context.WithTimeout(context.Background(), h.cfg.IOTimeout)
	defer cancel()
	m, err := memory.Map(ctx, h.cfg.MapSocket, h.cfg.Token)
	if err != nil {
		return err
	}
	if need := h.cfg.Offset + uint64(h.cfg.Size); m.Len() < need {
		m.Close()
		return fmt.Errorf("%w: the token's lease holds %d bytes, the region needs %d", errLeaseTooSmall, m.Len(), need)
	}
	if err := m.Write(ctx, h.cfg.Offset); err != nil {
		m.Close()
		return fmt.Errorf("check write rights: %w", err)
	}
	h.mp = m
	return nil
}

// connectTCP dials the memnode and checks the lease: large enough, and
// writable (an empty WRITE needs the write right and changes nothing).
func (h *helper) connectTCP() error {
	ctx, cancel := context.WithTimeout(context.Background(), h.cfg.IOTimeout)
	defer cancel()
	mc, err := memory.Dial(ctx, h.cfg.Endpoint, h.cfg.Token)
	if err != nil {
		return err
	}
	st, err := mc.Stat(ctx)
	if err != nil {
		mc.Close()
		return fmt.Errorf("stat the lease: %w", err)
	}
	if need := h.cfg.Offset + uint64(h.cfg.Size); st.Size < need {
		mc.Close()
		return fmt.Errorf("%w: the token's lease holds %d bytes, the region needs %d", errLeaseTooSmall, st.Size, need)
	}
	if err := mc.Write(ctx, h.cfg.Offset); err != nil {
		mc.Close()
		return fmt.Errorf("check write rights: %w", err)
	}
	h.mc = mc
	return nil
}

// control answers the parent's requests; the parent closing the socket
// or asking it to quit ends the process.
func (h *helper) control() {
	buf := make([]byte, 64)
	for {
		n, err := h.ctl.Read(buf)
		if err != nil || n == 0 || buf[0] == msgQuit {
			os.Exit(0)
		}
		if seq, ok := decodeStatsRequest(buf[:n]); ok {
			h.ctl.Write(encodeStats(seq, h.snapshot()))
		}
	}
}

func (h *helper) snapshot() Stats {
	s := &h.stats
	out := Stats{Faults: s.faults.Load(), WriteFaults: s.writeFaults.Load(), Fetches: s.fetches.Load(),
		Fetched: s.fetched.Load(), ZeroFills: s.zeroFills.Load(), Prefetched: s.prefetched.Load(),
		Evictions: s.evictions.Load(), Writebacks: s.writebacks.Load(), Written: s.written.Load(),
		Resident: s.resident.Load(), Budget: uint64(len(h.frames)), InFlight: s.inFlight.Load()}
	for i := range out.Latency {
		out.Latency[i] = s.latency[i].Load()
	}
	return out
}

// fail makes the region dead and reports err to the parent: the memory
// file is truncated, so that every access raises SIGBUS, the error is
// sent, and every waiting thread is woken to take its fault. The truncate
// goes first: once the parent has the error (Pager.Failed), no access can
// still reach a resident page. (A truncate is not instant: the size drops
// before the pages are unmapped, so an access that faults on the way can
// see a resident page after it; reporting first let a program that waited
// for Failed read one.) An access that faults before the error is in
// waits for it (Pager.Access).
func (h *helper) fail(err error) {
	if !h.failed.CompareAndSwap(false, true) {
		return
	}
	unix.Ftruncate(helperMemFD, 0)
	h.ctl.Write(encodeError(err))
	h.wakeAll()
}

func (h *helper) wakeAll() {
	uffdRange(helperUffdFD, ioctlWake, uintptr(h.cfg.Base), uintptr(h.cfg.Size))
}

func (h *helper) addr(page int) uintptr { return uintptr(h.cfg.Base) + uintptr(page*h.ps) }

type fault struct {
	page  int
	write bool
}

// serve reads fault messages and serves them, a batch at a time, until
// the userfaultfd fails.
func (h *helper) serve() {
	// A bug here must not leave the program's threads waiting on faults
	// nobody serves: fail the pager (dead region, threads woken) first.
	defer func() {
		if r := recover(); r != nil {
			h.failed.Store(false)
			h.fail(fmt.Errorf("helper: %v", r))
			panic(r)
		}
	}()
	var missing []fault
	for {
		n, err := unix.Read(helperUffdFD, h.msgs)
		if err == unix.EINTR || err == unix.EAGAIN {
			continue
		}
		if err != nil || n%uffdMsgSize != 0 {
			if err == nil {
				err = errShortMsg
			}
			h.fail(fmt.Errorf("read userfaultfd: %w", err))
			select {} // the parent ends the process
		}
		start := time.Now()
		missing = missing[:0]
		for m := h.msgs[:n]; len(m) >= uffdMsgSize; m = m[uffdMsgSize:] {
			if m[0] != uffdEventPagefault {
				continue
			}
			flags := binary.NativeEndian.Uint64(m[8:])
			addr := uintptr(binary.NativeEndian.Uint64(m[16:]))
			if addr < uintptr(h.cfg.Base) || addr-uintptr(h.cfg.Base) >= uintptr(h.cfg.Size) {
				continue
			}
			page := int(addr-uintptr(h.cfg.Base)) / h.ps
			switch {
			case h.failed.Load():
				uffdRange(helperUffdFD, ioctlWake, h.addr(page), uintptr(h.ps))
			case flags&uffdPagefaultFlagWP != 0:
				h.writeFault(page)
			default:
				missing = append(missing, fault{page, flags&uffdPagefaultFlagWrite != 0})
			}
		}
		if len(missing) > 0 && !h.failed.Load() {
			h.serveMissing(missing, start)
		}
	}
}

// writeFault serves the first write to a write-protected page: the page
// becomes dirty and writable. A page no longer resident (evicted while the
// write waited) is only unprotected, so that the write faults it in again.
func (h *helper) writeFault(page int) {
	if h.state[page]&fResident != 0 {
		h.state[page] |= fDirty | fRef
		h.stats.writeFaults.Add(1)
	}
	if err := uffdProtect(helperUffdFD, h.addr(page), uintptr(h.ps), false); err != nil {
		uffdRange(helperUffdFD, ioctlWake, h.addr(page), uintptr(h.ps))
	}
}

// group is one aligned prefetch group being brought in.
type group struct {
	lo, hi int // pages [lo, hi) of the group not resident, bounding the transfer
	buf    []byte
	fetch  bool // some page in [lo, hi) is in the pool
	err    error
}

// serveMissing brings in the groups of the faulting pages, evicting as
// many pages as they need first.
func (h *helper) serveMissing(faults []fault, start time.Time) {
	h.stats.inFlight.Add(uint64(len(faults)))
	defer h.stats.inFlight.Add(-uint64(len(faults)))
	slices.SortFunc(faults, func(a, b fault) int { return a.page - b.page })
	for len(faults) > 0 && !h.failed.Load() {
		// A chunk: consecutive groups whose missing pages fit in the budget.
		var chunk []group
		need, i, prevHi := 0, 0, 0
		for i < len(faults) {
			g0 := faults[i].page / h.prefetch * h.prefetch
			g := h.span(g0)
			n := h.countMissing(g.lo, g.hi)
			end := g0 + h.prefetch // the faults this group serves are below
			if n > 0 {
				if z, zn := h.zeroSpan(faults[i].page, prevHi, need); zn > n {
					g, n = z, zn
					end = faults[i].page/zeroWindow*zeroWindow + zeroWindow
				}
			}
			j := i
			for j < len(faults) && faults[j].page < end {
				j++
			}
			if len(chunk) > 0 && need+n > len(h.frames) {
				break
			}
			prevHi = max(prevHi, g.hi)
			if n > 0 {
				chunk = append(chunk, g)
				need += n
			}
			i = j
		}
		// Mark the pages the chunk installs before evicting: eviction may
		// drop a resident page inside a group, which is then left for its
		// own fault rather than installed over the budget.
		for _, g := range chunk {
			for p := g.lo; p < g.hi; p++ {
				if h.state[p]&fResident == 0 {
					h.state[p] |= fWanted
				}
			}
		}
		if err := h.ensureFree(need); err != nil {
			h.fail(err)
			return
		}
		h.fetch(chunk)
		for _, g := range chunk {
			if g.err != nil {
				h.fail(fmt.Errorf("fetch pages %d-%d: %w", g.lo, g.hi-1, g.err))
				return
			}
		}
		// Count, then install, then wake. A thread normally goes on when
		// the wake below reaches it, but one whose wait a signal cut short
		// (the Go runtime signals a goroutine that has run for 10ms to
		// preempt it, and one blocked in a fault looks like that) retries
		// its access and goes on as soon as its page is mapped. What it
		// then asks of Stats must already count its fault and the pages
		// that came with it; install takes back the count of a page it
		// leaves out.
		h.count(chunk, faults[:i], time.Since(start))
		for _, g := range chunk {
			h.install(g, faults[:i])
		}
		for _, g := range chunk {
			uffdRange(helperUffdFD, ioctlWake, h.addr(g.lo), uintptr((g.hi-g.lo)*h.ps))
		}
		for _, f := range faults[:i] {
			uffdRange(helperUffdFD, ioctlWake, h.addr(f.page), uintptr(h.ps))
		}
		faults = faults[i:]
	}
}

// span returns the group starting at page g0, narrowed to its first and
// last missing page.
func (h *helper) span(g0 int) group {
	end := min(g0+h.prefetch, h.pages)
	lo, hi := end, g0
	for p := g0; p < end; p++ {
		if h.state[p]&fResident == 0 {
			lo, hi = min(lo, p), p+1
		}
	}
	if lo >= hi {
		return group{lo: g0, hi: g0}
	}
	return group{lo: lo, hi: hi}
}

// zeroWindow is the most pages a fault on pages never written to the pool
// brings in (see zeroSpan).
const zeroWindow = 64

// zeroSpan widens the group of a fault on page f to the aligned window of
// zeroWindow pages around it, from page from on, when none of the
// window's missing pages is in the pool (they are all zeros) and the free
// frames hold them besides the need frames the chunk takes already. It
// returns the widened group, narrowed to its missing pages, and their
// number, or 0. (The prefetch is a power of two; below zeroWindow, a
// window is whole prefetch groups.) Zeros cost no fetch, and nothing is
// evicted for them, so filling a fresh region takes a fault per window
// rather than per prefetch group.
func (h *helper) zeroSpan(f, from, need int) (group, int) {
	w0 := f / zeroWindow * zeroWindow
	end := min(w0+zeroWindow, h.pages)
	lo, hi, n := end, w0, 0
	for p := max(w0, from); p < end; p++ {
		switch st := h.state[p]; {
		case st&fResident != 0:
		case st&fInPool != 0:
			return group{}, 0
		default:
			lo, hi, n = min(lo, p), p+1, n+1
		}
	}
	if n == 0 || need+n > len(h.free) {
		return group{}, 0
	}
	return group{lo: lo, hi: hi}, n
}

func (h *helper) countMissing(lo, hi int) int {
	n := 0
	for p := lo; p < hi; p++ {
		if h.state[p]&fResident == 0 {
			n++
		}
	}
	return n
}

// fetch reads the chunk's groups from the memnode, concurrently (the
// client pipelines them on its one connection). A group none of whose
// pages were ever written back is not read: it is zeros.
func (h *helper) fetch(chunk []group) {
	var wg sync.WaitGroup
	for k := range chunk {
		g := &chunk[k]
		for p := g.lo; p < g.hi; p++ {
			if h.state[p]&(fInPool|fWanted) == fInPool|fWanted {
				g.fetch = true
				break
			}
		}
		if !g.fetch {
			continue
		}
		if len(h.bufs) <= k {
			h.bufs = append(h.bufs, make([]byte, h.prefetch*h.ps))
		}
		g.buf = h.bufs[k][:(g.hi-g.lo)*h.ps]
		if h.mp != nil {
			g.err = h.readMapped(g.lo, g.hi, g.buf)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), h.cfg.IOTimeout)
			defer cancel()
			g.err = h.mc.Read(ctx, h.cfg.Offset+uint64(g.lo*h.ps), g.buf)
		}()
	}
	wg.Wait()
	for k := range chunk {
		g := &chunk[k]
		if !g.fetch {
			continue
		}
		h.stats.fetches.Add(1)
		h.stats.fetched.Add(uint64(len(g.buf)))
		// Pages never written back are zeros whatever the lease holds.
		for p := g.lo; p < g.hi; p++ {
			if h.state[p]&fInPool == 0 {
				clear(g.buf[(p-g.lo)*h.ps : (p-g.lo+1)*h.ps])
			}
		}
	}
}

// readMapped copies pages [lo, hi) from the mapped lease into buf (a copy
// of its own, so that what is checked is what gets installed) and checks
// each page the pool holds against its hash. The mapping refuses a read
// after the lease's expiry (memory.ErrExpired); a lease that the memnode
// discarded earlier (revoked, or the node restarted) reads zeros, which
// the hashes catch.
func (h *helper) readMapped(lo, hi int, buf []byte) error {
	if err := h.mp.Read(context.Background(), h.cfg.Offset+uint64(lo*h.ps), buf); err != nil {
		return err
	}
	for p := lo; p < hi; p++ {
		if h.state[p]&fInPool == 0 {
			continue
		}
		if h.sum(buf[(p-lo)*h.ps:(p-lo+1)*h.ps]) != h.sums[p] {
			return h.lostError(p)
		}
	}
	return nil
}

// sum is the hash of a page's contents kept for a mapped lease.
func (h *helper) sum(page []byte) uint32 { return uint32(maphash.Bytes(h.seed, page)) }

// lostError is the error of page p coming back from the mapped lease with
// other contents than were written: the memnode says why (revoked,
// expired, restarted, gone) when it can.
func (h *helper) lostError(p int) error {
	ctx, cancel := context.WithTimeout(context.Background(), h.cfg.IOTimeout)
	defer cancel()
	if _, err := h.mp.Stat(ctx); err != nil {
		return fmt.Errorf("page %d of the mapped lease lost its contents: %w", p, connLost(err))
	}
	return fmt.Errorf("page %d of the mapped lease changed under the pager (does another holder of the lease write it?)", p)
}

// watch asks the memnode every mapCheckEvery whether the mapped lease
// still stands, and fails the pager when it does not: the pages already
// in the mapping stay readable after the node lets go of the lease (or
// dies), but they are no longer the lease's, and a revoked lease must stop
// being used even where no fault notices it. A fault that finds a page
// changed fails the pager at once (readMapped).
func (h *helper) watch() {
	t := time.NewTicker(mapCheckEvery)
	defer t.Stop()
	for range t.C {
		if h.failed.Load() {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), h.cfg.IOTimeout)
		_, err := h.mp.Stat(ctx)
		cancel()
		if err != nil {
			h.fail(fmt.Errorf("the mapped lease: %w", connLost(err)))
			return
		}
	}
}

// connLost marks an error of the memnode's local socket that names none
// of the memory package's reasons (end of file, a broken pipe) as the
// connection lost, memory.ErrClosed, as the TCP client reports it.
func connLost(err error) error {
	for _, e := range wireErrors {
		if e != nil && errors.Is(err, e) {
			return err
		}
	}
	if errors.Is(err, context.DeadlineExceeded) || os.IsTimeout(err) {
		return err
	}
	return fmt.Errorf("%w: %w", memory.ErrClosed, err)
}

// count counts the faults of a chunk and the pages it is about to
// install: resident, zero-filled (in a group not fetched) and prefetched
// (installed ahead of a fault on them).
func (h *helper) count(chunk []group, faults []fault, latency time.Duration) {
	h.stats.faults.Add(uint64(len(faults)))
	h.stats.latency[latencyBucket(latency)].Add(uint64(len(faults)))
	for _, g := range chunk {
		for p := g.lo; p < g.hi; p++ {
			if h.state[p]&fWanted != 0 {
				h.countPage(p, !g.fetch, faults, 1)
			}
		}
	}
}

// countPage adds d (1 or -1) to the counts of page p about to be
// installed, zeros if zero.
func (h *helper) countPage(p int, zero bool, faults []fault, d int) {
	h.stats.resident.Add(uint64(d))
	if zero {
		h.stats.zeroFills.Add(uint64(d))
	}
	if !isFault(faults, p) {
		h.stats.prefetched.Add(uint64(d))
	}
}

// isFault reports whether page p is among the (sorted) faults.
func isFault(faults []fault, p int) bool {
	_, ok := slices.BinarySearchFunc(faults, p, func(f fault, p int) int { return f.page - p })
	return ok
}

// isWrite reports whether a fault on page p among the (sorted) faults is
// a write.
func isWrite(faults []fault, p int) bool {
	i, ok := slices.BinarySearchFunc(faults, p, func(f fault, p int) int { return f.page - p })
	for ok && i < len(faults) && faults[i].page == p {
		if faults[i].write {
			return true
		}
		i++
	}
	return false
}

// install maps the group's missing pages. Pages fetched over TCP go in
// write-protected (clean; their first write is a write-protect fault),
// except a page whose fault was a write, which goes in writable and
// dirty. Zeros (a group not fetched), and every page from a mapped lease,
// go in writable and are taken as dirty: eviction reads them back and
// writes only those that changed (writeBack), which costs a compare where
// a write-protect fault costs two process switches. The pages are counted
// already (see count); a page left out is taken off the counts.
func (h *helper) install(g group, faults []fault) {
	for p := g.lo; p < g.hi; {
		if h.state[p]&fWanted == 0 {
			p++
			continue
		}
		q := p + 1
		writable := h.cfg.Writable || !g.fetch
		w := writable || isWrite(faults, p)
		switch {
		case writable:
			for q < g.hi && h.state[q]&fWanted != 0 {
				q++
			}
		case !w:
			for q < g.hi && h.state[q]&fWanted != 0 && !isWrite(faults, q) {
				q++
			}
		}
		src := h.zero[:(q-p)*h.ps]
		if g.fetch {
			src = g.buf[(p-g.lo)*h.ps : (q-g.lo)*h.ps]
		}
		for r := p; r < q; r++ {
			h.state[r] &^= fWanted
		}
		left, ok := h.copyRun(p, q, src, !w)
		if !ok {
			return
		}
		for r := q - left; r < q; r++ {
			h.countPage(r, !g.fetch, faults, -1)
		}
		p = q
	}
}

// copyRun installs pages [p, q) from src. It returns how many pages at the
// end of the run it left out, and false if it failed the pager. A page
// found already mapped (EEXIST) is taken as resident and dirty; a
// transient EAGAIN is retried a few times, then the pages are left for
// their threads to fault again.
func (h *helper) copyRun(p, q int, src []byte, wp bool) (left int, ok bool) {
	for tries := 0; p < q; {
		n, err := uffdCopy(helperUffdFD, h.addr(p), src, wp)
		done := n / h.ps
		for r := p; r < p+done; r++ {
			h.take(r, !wp)
		}
		p, src = p+done, src[done*h.ps:]
		switch {
		case err == nil && p >= q:
			return 0, true
		case err == nil:
			continue
		case errors.Is(err, unix.EEXIST):
			h.take(p, true)
			uffdRange(helperUffdFD, ioctlWake, h.addr(p), uintptr(h.ps))
			p, src = p+1, src[h.ps:]
		case errors.Is(err, unix.EAGAIN) && tries < 8:
			tries++
		case errors.Is(err, unix.EAGAIN):
			uffdRange(helperUffdFD, ioctlWake, h.addr(p), uintptr((q-p)*h.ps))
			return q - p, true
		default:
			h.fail(fmt.Errorf("install pages %d-%d: %w", p, q-1, err))
			return q - p, false
		}
	}
	return 0, true
}

// take records page p as resident in a free frame (count counted it).
func (h *helper) take(p int, dirty bool) {
	h.state[p] |= fResident | fRef
	if dirty {
		h.state[p] |= fDirty
	}
	f := h.free[len(h.free)-1]
	h.free = h.free[:len(h.free)-1]
	h.frames[f] = int32(p)
	h.frameOf[p] = f
}

// ensureFree evicts pages until need frames are free. When it has to
// evict, it evicts at least a batch (1/32 of the budget, 1 to 64 pages),
// so that writebacks go out together and overlap instead of costing a
// round trip per fault.
func (h *helper) ensureFree(need int) error {
	n := need - len(h.free)
	if n <= 0 {
		return nil
	}
	batch := min(max(len(h.frames)/32, 1), 64)
	n = min(max(n, batch), len(h.frames)-len(h.free))
	return h.evict(h.victims(n))
}

// victims picks n resident pages by CLOCK over the frames: a page whose
// reference bit is set (it was installed or first written since the hand
// last passed) has the bit cleared and is passed over once.
func (h *helper) victims(n int) []int {
	var v []int
	for steps := 0; len(v) < n && steps < 3*len(h.frames); steps++ {
		f := h.hand
		h.hand = (h.hand + 1) % len(h.frames)
		p := h.frames[f]
		if p < 0 || h.state[p]&fVictim != 0 {
			continue
		}
		if h.state[p]&fRef != 0 {
			h.state[p] &^= fRef
			continue
		}
		h.state[p] |= fVictim
		v = append(v, int(p))
	}
	slices.Sort(v)
	return v
}

// evict drops the victim pages (sorted). Dirty ones are write-protected
// first, so that a write racing with the eviction waits instead of being
// lost, then read from the memory file and written to the memnode in runs
// of adjacent pages, concurrently; then every victim's page is punched out
// of the memory file, which unmaps it from the region, and threads that
// waited on it are woken to fault it in again.
func (h *helper) evict(victims []int) error {
	var dirty []run
	for _, p := range victims {
		if h.state[p]&fDirty == 0 {
			continue
		}
		if n := len(dirty); n > 0 && dirty[n-1].hi == p && p-dirty[n-1].lo < maxWriteRun {
			dirty[n-1].hi++
		} else {
			dirty = append(dirty, run{p, p + 1})
		}
	}
	for _, r := range dirty {
		if err := uffdProtect(helperUffdFD, h.addr(r.lo), uintptr((r.hi-r.lo)*h.ps), true); err != nil {
			return fmt.Errorf("write-protect pages %d-%d for writeback: %w", r.lo, r.hi-1, err)
		}
	}
	if err := h.writeBack(dirty); err != nil {
		return err
	}
	for i := 0; i < len(victims); {
		j := i + 1
		for j < len(victims) && victims[j] == victims[j-1]+1 {
			j++
		}
		lo, n := victims[i], j-i
		if err := unix.Fallocate(helperMemFD, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, int64(lo*h.ps), int64(n*h.ps)); err != nil {
			return fmt.Errorf("drop pages %d-%d: %w", lo, lo+n-1, err)
		}
		uffdRange(helperUffdFD, ioctlWake, h.addr(lo), uintptr(n*h.ps))
		i = j
	}
	for _, p := range victims {
		h.state[p] &^= fResident | fDirty | fRef | fVictim
		f := h.frameOf[p]
		h.frames[f] = -1
		h.free = append(h.free, f)
	}
	h.stats.evictions.Add(uint64(len(victims)))
	h.stats.resident.Add(-uint64(len(victims)))
	return nil
}

// run is the pages [lo, hi).
type run struct{ lo, hi int }

// writeBack writes the dirty victims' runs (write-protected already) to
// the pool, up to maxWriters runs at a time. Each run is read back from
// the memory file and only the pages that changed are written: a page the
// pool does not hold that is still zeros is not (it comes back as zeros
// anyway), nor, from a mapped lease, a page equal to the pool's copy.
// Over TCP the writes of a batch go out concurrently; to a mapped lease
// they are copies, each page's hash kept for its return.
func (h *helper) writeBack(dirty []run) error {
	ps := h.ps
	var pool []byte
	if h.mp != nil {
		pool = h.mp.Bytes()[h.cfg.Offset:]
	}
	type write struct {
		run
		buf []byte
		err error
	}
	var writes []write
	for len(dirty) > 0 {
		batch := dirty[:min(len(dirty), maxWriters)]
		dirty = dirty[len(batch):]
		writes = writes[:0]
		for i, r := range batch {
			buf := h.wbuf[i*maxWriteRun*ps : (i*maxWriteRun+r.hi-r.lo)*ps]
			if _, err := unix.Pread(helperMemFD, buf, int64(r.lo*ps)); err != nil {
				return fmt.Errorf("read back pages %d-%d: %w", r.lo, r.hi-1, err)
			}
			changed := func(p int) bool {
				pg := buf[(p-r.lo)*ps : (p-r.lo+1)*ps]
				switch {
				case h.state[p]&fInPool == 0:
					return !bytes.Equal(pg, h.zero[:ps])
				case pool != nil:
					return !bytes.Equal(pg, pool[p*ps:(p+1)*ps])
				}
				return true
			}
			from := -1 // the first page of a run of changed pages
			for p := r.lo; p <= r.hi; p++ {
				switch c := p < r.hi && changed(p); {
				case c && from < 0:
					from = p
				case !c && from >= 0:
					writes = append(writes, write{run: run{from, p}, buf: buf[(from-r.lo)*ps : (p-r.lo)*ps]})
					from = -1
				}
			}
		}
		if h.mp != nil {
			for k := range writes {
				w := &writes[k]
				for p := w.lo; p < w.hi; p++ {
					h.sums[p] = h.sum(w.buf[(p-w.lo)*ps : (p-w.lo+1)*ps])
				}
				w.err = h.mp.Write(context.Background(), h.cfg.Offset+uint64(w.lo*ps), w.buf)
			}
		} else {
			var wg sync.WaitGroup
			for k := range writes {
				w := &writes[k]
				wg.Go(func() {
					ctx, cancel := context.WithTimeout(context.Background(), h.cfg.IOTimeout)
					defer cancel()
					w.err = h.mc.Write(ctx, h.cfg.Offset+uint64(w.lo*ps), w.buf)
				})
			}
			wg.Wait()
		}
		for _, w := range writes {
			if w.err != nil {
				return fmt.Errorf("write back pages %d-%d: %w", w.lo, w.hi-1, w.err)
			}
			for p := w.lo; p < w.hi; p++ {
				h.state[p] |= fInPool
			}
			h.stats.writebacks.Add(uint64(w.hi - w.lo))
			h.stats.written.Add(uint64((w.hi - w.lo) * ps))
		}
	}
	return nil
}
