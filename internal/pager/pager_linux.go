//go:build linux && (amd64 || arm64 || riscv64 || loong64)

package pager

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime/debug"
	"strings"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Pager is a region of virtual memory backed by pooled memory. Its methods
// are safe for concurrent use.
type Pager struct {
	region []byte
	base   uintptr
	uffd   int // this process's reference; the helper holds another
	memfd  int

	cmd     *exec.Cmd
	ctl     *net.UnixConn
	exited  chan struct{}   // closed when the helper has exited and been waited for
	replies chan statsReply // the latest stats reply not yet taken

	statsWait time.Duration // how long Stats waits for the helper: Options.IOTimeout

	mu        sync.Mutex
	closed    bool
	err       error         // why the pager failed; nil while it works
	failed    chan struct{} // closed when err is set
	active    int           // Access calls running
	unmapped  bool
	lastStats Stats
	statsMu   sync.Mutex // one stats request at a time; guards statsSeq
	statsSeq  uint64     // the last stats request's sequence number
}

type statsReply struct {
	seq uint64
	s   Stats
}

// Open maps a region of opts.Size bytes, registers it with userfaultfd and
// starts the helper process that serves its faults from the memnode. It
// returns once the helper has reached the memnode and checked that the
// lease holds the region, or with the reason it could not (a bad or
// expired token, a lease too small, ErrUnsupported). ctx bounds the start.
func Open(ctx context.Context, opts Options) (_ *Pager, err error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if opts.Prefetch == 0 {
		opts.Prefetch = DefaultPrefetch
	}
	if opts.IOTimeout == 0 {
		opts.IOTimeout = 10 * time.Second
	}
	p := &Pager{uffd: -1, memfd: -1, failed: make(chan struct{}), exited: make(chan struct{}), replies: make(chan statsReply, 1),
		statsWait: opts.IOTimeout}
	defer func() {
		if err != nil {
			p.teardown()
		}
	}()
	// The region is a shared mapping of a memory file rather than private
	// anonymous memory: the helper, another process, drops a page by
	// punching a hole in the file, and reads dirty pages back from it.
	if p.memfd, err = unix.MemfdCreate("rackpool-pager", unix.MFD_CLOEXEC); err != nil {
		return nil, fmt.Errorf("pager: memfd_create: %w", err)
	}
	if err := unix.Ftruncate(p.memfd, opts.Size); err != nil {
		return nil, fmt.Errorf("pager: size the region: %w", err)
	}
	if p.region, err = unix.Mmap(p.memfd, 0, int(opts.Size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_NORESERVE); err != nil {
		return nil, fmt.Errorf("pager: map the region: %w", err)
	}
	p.base = uintptr(unsafe.Pointer(&p.region[0]))
	if p.uffd, err = newUffd(); err != nil {
		return nil, err
	}
	if err := initUffd(p.uffd, p.base, uintptr(opts.Size)); err != nil {
		return nil, err
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("pager: control socket: %w", err)
	}
	ctlFile := os.NewFile(uintptr(fds[0]), "pager-control")
	c, err := net.FileConn(ctlFile)
	ctlFile.Close()
	if err != nil {
		unix.Close(fds[1])
		return nil, fmt.Errorf("pager: control socket: %w", err)
	}
	p.ctl = c.(*net.UnixConn)
	if err := p.startHelper(opts, fds[1]); err != nil {
		return nil, err
	}
	cfg, _ := json.Marshal(helperConfig{Base: uint64(p.base), Size: opts.Size, Local: opts.Local, Endpoint: opts.Endpoint,
		Token: opts.Token, Offset: opts.Offset, Prefetch: opts.Prefetch, IOTimeout: opts.IOTimeout,
		MapSocket: opts.MapSocket, Writable: opts.MapSocket != ""})
	if _, err := p.ctl.Write(append([]byte{msgConfig}, cfg...)); err != nil {
		return nil, fmt.Errorf("pager: configure the helper: %w", err)
	}
	if err := p.awaitReady(ctx); err != nil {
		return nil, err
	}
	go p.readControl()
	return p, nil
}

// startHelper starts the helper process with the userfaultfd, the memory
// file and its end of the control socket as descriptors 3, 4 and 5.
func (p *Pager) startHelper(opts Options, ctlFD int) error {
	exe, err := os.Executable()
	if err != nil {
		unix.Close(ctlFD)
		return fmt.Errorf("pager: find the executable for the helper: %w", err)
	}
	files := []*os.File{os.NewFile(uintptr(ctlFD), "pager-control")}
	for _, fd := range []int{p.uffd, p.memfd} {
		d, err := unix.Dup(fd)
		if err != nil {
			closeAll(files)
			return fmt.Errorf("pager: dup: %w", err)
		}
		files = append(files, os.NewFile(uintptr(d), "pager-fd"))
	}
	defer closeAll(files)
	cmd := exec.Command(exe, opts.HelperArgs...)
	cmd.Env = append(os.Environ(), HelperEnv+"=1")
	cmd.ExtraFiles = []*os.File{files[1], files[2], files[0]}
	cmd.Stdout = nil
	cmd.Stderr = os.Stderr
	if opts.HelperStderr != nil {
		cmd.Stderr = opts.HelperStderr
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("pager: start the helper: %w", err)
	}
	p.cmd = cmd
	go func() {
		cmd.Wait()
		close(p.exited)
	}()
	return nil
}

func closeAll(fs []*os.File) {
	for _, f := range fs {
		f.Close()
	}
}

// awaitReady reads the helper's first message.
func (p *Pager) awaitReady(ctx context.Context) error {
	if dl, ok := ctx.Deadline(); ok {
		p.ctl.SetReadDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { p.ctl.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	buf := make([]byte, 2048)
	n, err := p.ctl.Read(buf)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("pager: start the helper: %w", ctx.Err())
		}
		return fmt.Errorf("pager: the helper did not start: %w", err)
	}
	p.ctl.SetReadDeadline(time.Time{})
	switch {
	case n >= 1 && buf[0] == msgReady:
		return nil
	case n >= 1 && buf[0] == msgError:
		err := decodeError(buf[:n])
		if strings.HasPrefix(err.Error(), "pager: ") {
			return err
		}
		return fmt.Errorf("pager: %w", err)
	}
	return fmt.Errorf("pager: the helper sent %q at start", buf[:min(n, 16)])
}

// readControl reads the helper's messages until the socket closes.
func (p *Pager) readControl() {
	buf := make([]byte, 2048)
	for {
		n, err := p.ctl.Read(buf)
		if err != nil || n == 0 {
			// A dead helper serves no fault: make the region dead
			// (faults raise SIGBUS) rather than leave threads waiting,
			// then record the failure (see helper.fail for the order).
			p.kill()
			p.fail(fmt.Errorf("%w: the helper process stopped", ErrFailed))
			return
		}
		switch buf[0] {
		case msgError:
			p.fail(fmt.Errorf("%w: %w", ErrFailed, decodeError(buf[:n])))
		case msgStats:
			if seq, s, err := decodeStats(buf[:n]); err == nil {
				// Only this goroutine sends: drop an older reply nobody
				// took, then this one fits.
				select {
				case <-p.replies:
				default:
				}
				p.replies <- statsReply{seq, s}
			}
		}
	}
}

// fail records the first failure.
func (p *Pager) fail(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil || p.closed {
		return
	}
	p.err = err
	close(p.failed)
}

// kill makes the region dead: its file is truncated to nothing, so every
// access faults with SIGBUS, and threads waiting on a fault are woken to
// take that fault. It is idempotent.
func (p *Pager) kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.memfd < 0 || p.uffd < 0 {
		return
	}
	unix.Ftruncate(p.memfd, 0)
	uffdRange(p.uffd, ioctlWake, p.base, uintptr(len(p.region)))
}

// Bytes returns the region. Its pages are served from the memnode on
// first touch and after eviction. It must not be used after Close; see
// Access for what an access does once the pager has failed.
func (p *Pager) Bytes() []byte { return p.region }

// Err returns why the pager failed, wrapping ErrFailed, or nil.
func (p *Pager) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// Failed returns a channel that is closed when the pager fails.
func (p *Pager) Failed() <-chan struct{} { return p.failed }

// Access runs f with the region in the calling goroutine and returns nil,
// or, if an access to the region faulted because the pager failed or was
// closed while f ran, the pager's error (wrapping ErrFailed, or ErrClosed).
// f is abandoned at the faulting access, as by a panic. Other panics pass
// through. Only accesses made by the calling goroutine are covered; a
// goroutine f starts must make its own Access call. A closed pager's
// Access returns ErrClosed without calling f. The region stays mapped
// until every Access has returned, even across Close.
func (p *Pager) Access(f func(region []byte)) (err error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return ErrClosed
	}
	p.active++
	p.mu.Unlock()
	old := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(old)
		r := recover()
		if r != nil {
			if ae, ok := r.(interface{ Addr() uintptr }); ok && ae.Addr()-p.base < uintptr(len(p.region)) {
				err = p.accessError()
			} else {
				p.release()
				panic(r)
			}
		}
		p.release()
	}()
	f(p.region)
	return nil
}

// accessError is the error of an access that faulted: the pager was
// closed, or it failed. The helper sends its error as soon as it has made
// the region dead, and a helper that stops without one is seen stopping,
// so the error is on its way if it is not in yet: this waits for it, not
// for an amount of time (the minute is a backstop for a bug).
func (p *Pager) accessError() error {
	backstop := time.NewTimer(time.Minute)
	defer backstop.Stop()
	exited := p.exited
	for {
		p.mu.Lock()
		closed, err := p.closed, p.err
		p.mu.Unlock()
		switch {
		case err != nil:
			return err
		case closed:
			return ErrClosed
		}
		select {
		case <-p.failed:
		case <-exited:
			// Closed, or readControl is about to see the socket close
			// and fail the pager.
			exited = nil
		case <-backstop.C:
			return fmt.Errorf("%w: the region faulted without a reason from the helper", ErrFailed)
		}
	}
}

// release ends an Access, unmapping the region if it was the last one
// after Close.
func (p *Pager) release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.active--
	if p.closed && p.active == 0 {
		p.unmapLocked()
	}
}

func (p *Pager) unmapLocked() {
	if !p.unmapped && p.region != nil {
		unix.Munmap(p.region)
		p.unmapped = true
	}
}

// Stats returns the pager's counters, asked of the helper. After Close,
// or if the helper has exited or does not answer within Options.IOTimeout
// (it answers at once unless its machine is overloaded), it returns the
// last ones the helper gave.
//
// A missing-page fault, the pages that came in with it and the evictions
// that made room for them are counted before the faulting access goes on,
// and a first write before the write goes on, so counters asked for after
// an access returns include everything that access caused.
func (p *Pager) Stats() Stats {
	p.statsMu.Lock()
	defer p.statsMu.Unlock()
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if !closed {
		p.statsSeq++
		seq := p.statsSeq
		if _, err := p.ctl.Write(encodeStatsRequest(seq)); err == nil {
			timeout := time.NewTimer(p.statsWait)
			defer timeout.Stop()
		wait:
			for {
				select {
				case r := <-p.replies:
					if r.seq != seq {
						continue // a late reply to an earlier request
					}
					p.mu.Lock()
					p.lastStats = r.s
					p.mu.Unlock()
					break wait
				case <-p.exited:
					break wait
				case <-timeout.C:
					break wait
				}
			}
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lastStats
}

// Close stops the pager: the helper exits, the region becomes dead (a
// thread waiting on a fault is woken and takes SIGBUS, which Access turns
// into ErrClosed), the region is unregistered and, once no Access call is
// running, unmapped. The region's contents are dropped; nothing is written
// back. Close does not wait for the memnode and never blocks on a fault.
// It is idempotent.
func (p *Pager) Close() error {
	p.Stats() // keep the last counters
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	p.ctl.Write([]byte{msgQuit})
	p.kill()
	p.mu.Lock()
	uffdRange(p.uffd, ioctlUnregister, p.base, uintptr(len(p.region)))
	p.mu.Unlock()
	select {
	case <-p.exited:
	case <-time.After(5 * time.Second):
		p.cmd.Process.Kill()
		<-p.exited
	}
	p.teardown()
	return nil
}

// teardown releases the descriptors and, with no Access running, the
// mapping. It runs once the helper is gone or never started.
func (p *Pager) teardown() {
	if p.cmd != nil {
		select {
		case <-p.exited:
		default:
			p.cmd.Process.Kill()
			<-p.exited
		}
	}
	if p.ctl != nil {
		p.ctl.Close()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for _, fd := range []*int{&p.uffd, &p.memfd} {
		if *fd >= 0 {
			unix.Close(*fd)
			*fd = -1
		}
	}
	if p.active == 0 {
		p.unmapLocked()
	}
}
