package memory

import (
	"encoding/binary"
	"net"
	"time"

	"rackpool/internal/clock"
)

// Mapped grants: a local client asks for the lease's region as memory it
// can map (MAP, on the node's unix socket only). The first MAP of a lease
// moves the region out of the shared capacity into a backing object of its
// own (grantMem: a sealed memory file the size of the region), which the
// server maps too and hands to the client as a file descriptor. Every
// later access to the region, TCP READ and WRITE included, goes to that
// object, so the TCP path and the mapped path see the same bytes. When the
// lease is zeroed, revoked or expires, the object's pages are discarded
// (hole-punched) and the server lets go of it: a holder that kept its
// mapping reads zeros from then on, and whatever it stores there lands in
// an object nobody else will ever map. A later lease of the same range gets
// a fresh object. That is the isolation argument: a descriptor names one
// lease's object and nothing else, so no mapping, stale or live, can reach
// another lease's bytes.

// reapEvery is how often the server looks for mapped leases whose last
// token expired.
const reapEvery = time.Second

// readRegion copies len(dst) bytes at region offset rel of the lease whose
// region starts at base into dst. The caller has checked the range.
func (s *Server) readRegion(l *lease, dst []byte, base, rel uint64) {
	n := uint64(len(dst))
	abs := base + rel
	s.mem.lock(abs, n, false)
	if g := l.grant.Load(); g != nil {
		copy(dst, g.buf[rel:rel+n])
	} else {
		copy(dst, s.mem.buf[abs:abs+n])
	}
	s.mem.unlock(abs, n, false)
}

// writeRegion copies src to region offset rel of the lease whose region
// starts at base. The caller has checked the range.
func (s *Server) writeRegion(l *lease, base, rel uint64, src []byte) {
	n := uint64(len(src))
	abs := base + rel
	s.mem.lock(abs, n, true)
	if g := l.grant.Load(); g != nil {
		copy(g.buf[rel:rel+n], src)
		s.mem.unlock(abs, n, true)
		return
	}
	copy(s.mem.buf[abs:abs+n], src)
	s.mem.unlock(abs, n, true)
	s.mem.touch(abs, n)
}

// grantFor returns the lease's backing object, moving the region into a new
// one on first use: the pages written so far are copied, the capacity's
// copy is dropped.
func (s *Server) grantFor(l *lease, off, length uint64) (*grantMem, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if g := l.grant.Load(); g != nil {
		return g, nil
	}
	g, err := newGrantMem(length)
	if err != nil {
		return nil, err
	}
	s.mem.lock(off, length, true)
	s.mem.eachTouched(off, length, func(p uint64) {
		copy(g.buf[p-off:p-off+usagePage], s.mem.buf[p:p+usagePage])
	})
	l.grant.Store(g)
	s.mem.unlock(off, length, true)
	// Nothing reads the capacity's copy of the region any more.
	s.mem.zero(off, length)
	s.startReaper()
	return g, nil
}

// dropGrantLocked discards the lease's backing object, if it has one, and
// returns the region to the capacity (zeroed). l.mu is held exclusively.
func (s *Server) dropGrantLocked(id string, l *lease) {
	g := l.grant.Load()
	if g == nil {
		return
	}
	s.leaseMu.Lock()
	off, length := l.off, l.length
	s.leaseMu.Unlock()
	s.mem.lock(off, length, true)
	l.grant.Store(nil)
	s.mem.unlock(off, length, true)
	if err := g.discard(); err != nil {
		s.log.Error("discarding a mapped lease's memory", "lease", id, "err", err)
	}
	s.log.Info("mapped lease discarded", "lease", id)
}

// dropAllGrants discards every backing object (Close).
func (s *Server) dropAllGrants() {
	s.leaseMu.Lock()
	ls := make(map[string]*lease, len(s.leases))
	for id, l := range s.leases {
		if l.grant.Load() != nil {
			ls[id] = l
		}
	}
	s.leaseMu.Unlock()
	for id, l := range ls {
		l.mu.Lock()
		s.dropGrantLocked(id, l)
		l.mu.Unlock()
	}
}

// ReapExpired discards the backing objects of mapped leases whose last
// token has expired and returns how many it discarded. The server calls it
// every second once a lease has been mapped; a client that never releases
// its mapping so loses it at the lease's expiry unless it presents a
// renewed token first.
func (s *Server) ReapExpired() int {
	now := s.clock.Now()
	s.leaseMu.Lock()
	var due []*lease
	var ids []string
	for id, l := range s.leases {
		if l.grant.Load() != nil && !now.Before(l.expiry) {
			due = append(due, l)
			ids = append(ids, id)
		}
	}
	s.leaseMu.Unlock()
	n := 0
	for i, l := range due {
		l.mu.Lock()
		s.leaseMu.Lock()
		expired := !now.Before(l.expiry)
		s.leaseMu.Unlock()
		if expired && l.grant.Load() != nil {
			s.dropGrantLocked(ids[i], l)
			n++
		}
		l.mu.Unlock()
	}
	return n
}

// startReaper starts the goroutine that calls ReapExpired, once.
func (s *Server) startReaper() {
	s.reapOnce.Do(func() {
		done := s.net.Done()
		s.net.Go(func() {
			t := clock.NewTicker(s.clock, reapEvery)
			defer t.Stop()
			for {
				select {
				case <-done:
					return
				case <-t.C():
					s.ReapExpired()
				}
			}
		})
	})
}

// mapRegion serves MAP: the connection's lease region as a descriptor,
// sent with the answer over the unix socket.
func (c *serverConn) mapRegion(h *reqHeader) {
	if st, msg := c.check(opMap); st != statusOK {
		c.fail(h.tag, st, msg)
		return
	}
	uc, ok := c.nc.(*net.UnixConn)
	if !ok {
		c.fail(h.tag, statusProtocol, "MAP is served on the node's local socket only")
		return
	}
	if h.offset != 0 || uint64(h.count) != 0 {
		c.fail(h.tag, statusProtocol, "MAP takes no offset or count")
		return
	}
	g, err := c.s.grantFor(c.lease, c.claims.Offset, c.claims.Length)
	if err != nil {
		c.s.log.Error("mapping a lease", "lease", c.claims.Lease, "err", err)
		c.fail(h.tag, statusNoSpace, "the node could not create the mapping")
		return
	}
	fd, closeFD, err := g.fdFor(c.claims.Rights&RightWrite != 0)
	if err != nil {
		c.s.log.Error("mapping a lease", "lease", c.claims.Lease, "err", err)
		c.fail(h.tag, statusNoSpace, "the node could not create the mapping")
		return
	}
	defer closeFD()
	if err := c.flush(); err != nil {
		return // the connection is gone; serve notices on its next read
	}
	var resp [respHdrLen + mapRespLen]byte
	b := appendRespHeader(resp[:0], h.tag, statusOK, mapRespLen)
	b = binary.BigEndian.AppendUint64(b, c.claims.Length)
	b = binary.BigEndian.AppendUint64(b, uint64(c.claims.Expiry.UnixNano()))
	b = binary.BigEndian.AppendUint64(b, c.s.epoch)
	if _, _, err := uc.WriteMsgUnix(b, rightsOf(fd), nil); err != nil {
		c.s.log.Debug("sending a mapping", "lease", c.claims.Lease, "err", err)
		return
	}
	c.s.log.Info("lease mapped", "lease", c.claims.Lease, "rights", c.claims.Rights.String())
}
