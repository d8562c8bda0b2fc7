//go:build linux

package memory

import (
	"fmt"
	"math"
	"sync"

	"golang.org/x/sys/unix"
)

// grantMem is a mapped lease's backing object: an anonymous memory file
// (memfd) the size of the region, sealed against growing and shrinking, and
// the server's shared mapping of it. Its pages take memory only once
// written, by the server or by any holder's mapping.
type grantMem struct {
	buf []byte

	mu     sync.Mutex // fd and closed, against used and fdFor racing discard
	fd     int
	closed bool
}

func newGrantMem(length uint64) (*grantMem, error) {
	if length > math.MaxInt {
		return nil, fmt.Errorf("memory: mapping of %d bytes too large", length)
	}
	fd, err := unix.MemfdCreate("rackpool-lease", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("memory: memfd_create: %w", err)
	}
	fail := func(what string, err error) (*grantMem, error) {
		unix.Close(fd)
		return nil, fmt.Errorf("memory: %s: %w", what, err)
	}
	if err := unix.Ftruncate(fd, int64(length)); err != nil {
		return fail("size the mapping", err)
	}
	// A holder may not resize the object: shrinking would make the
	// server's own accesses fault, growing would take memory the lease
	// does not grant.
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL); err != nil {
		return fail("seal the mapping", err)
	}
	buf, err := unix.Mmap(fd, 0, int(length), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fail("map", err)
	}
	return &grantMem{buf: buf, fd: fd}, nil
}

// fdFor returns a descriptor to send: the object itself for a writer, a
// read-only descriptor of it for a reader (a writable shared mapping of it
// then fails with EACCES). closeFD releases what fdFor opened.
func (g *grantMem) fdFor(write bool) (fd int, closeFD func(), err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return -1, nil, fmt.Errorf("memory: mapping discarded")
	}
	if write {
		return g.fd, func() {}, nil
	}
	ro, err := unix.Open(fmt.Sprintf("/proc/self/fd/%d", g.fd), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, nil, fmt.Errorf("memory: read-only descriptor: %w", err)
	}
	return ro, func() { unix.Close(ro) }, nil
}

// used is the bytes of the object that hold pages.
func (g *grantMem) used() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return 0
	}
	var st unix.Stat_t
	if err := unix.Fstat(g.fd, &st); err != nil {
		return 0
	}
	return uint64(st.Blocks) * 512
}

// discard punches the whole object out, so that every mapping of it reads
// zeros, and lets go of it.
func (g *grantMem) discard() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil
	}
	g.closed = true
	err := unix.Fallocate(g.fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 0, int64(len(g.buf)))
	if err != nil {
		err = fmt.Errorf("punch: %w", err)
	}
	if e := unix.Munmap(g.buf); e != nil && err == nil {
		err = fmt.Errorf("unmap: %w", e)
	}
	if e := unix.Close(g.fd); e != nil && err == nil {
		err = fmt.Errorf("close: %w", e)
	}
	return err
}

// rightsOf is the control message that passes fd.
func rightsOf(fd int) []byte { return unix.UnixRights(fd) }
