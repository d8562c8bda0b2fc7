package netserve

import (
	"context"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Server owns a data-plane server's listeners, its connections and the
// goroutines that serve them; the server keeps only its protocol. C is
// the server's state of one connection, kept beside it so that the server
// can list its connections (memcached's `stats conns`). The zero value is
// ready to use; a Server must not be copied after first use. It is safe
// for concurrent use.
type Server[C any] struct {
	ids atomic.Int64 // IDs of listeners and connections, one sequence

	mu        sync.Mutex
	closed    bool
	done      chan struct{} // closed by Close; made on first use
	listeners map[net.Listener]int64
	conns     map[*Conn[C]]struct{}
	wg        sync.WaitGroup // connections' and Go's goroutines
}

// Conn is one connection a Server serves.
type Conn[C any] struct {
	NC    net.Conn
	ID    int64 // from the sequence listeners take theirs from
	State C

	cancel context.CancelFunc
}

// Handler is a server's protocol as Serve runs it.
type Handler[C any] struct {
	// Open makes the state of the connection accepted as number id. It
	// runs on the accept loop and must not block; nil means the zero C.
	Open func(nc net.Conn, id int64) C
	// Serve serves the connection on a goroutine of its own, as in
	// ServeConn. Required.
	Serve func(ctx context.Context, c *Conn[C])
	// Logger receives retried accept failures (default: discard).
	Logger *slog.Logger
	// Sleep waits between retries of a failed accept (default
	// time.Sleep; tests inject it).
	Sleep func(time.Duration)
}

// Serve accepts connections on l until Close, then returns nil; it returns
// an error wrapping net.ErrClosed when l is closed under an open server.
// Accept failures a wait can cure are retried (Loop). Serve may be called
// on several listeners; each takes an ID from the connections' sequence.
func (s *Server[C]) Serve(l net.Listener, h Handler[C]) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		l.Close()
		return nil
	}
	if s.listeners == nil {
		s.listeners = make(map[net.Listener]int64)
	}
	s.listeners[l] = s.ids.Add(1)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, l)
		s.mu.Unlock()
	}()

	return Loop{
		Closed: s.Closed,
		Logger: h.Logger,
		Sleep:  h.Sleep,
		Handle: func(nc net.Conn) {
			id := s.ids.Add(1)
			var st C
			if h.Open != nil {
				st = h.Open(nc, id)
			}
			c, ctx, ok := s.track(context.Background(), nc, id, st)
			if !ok {
				return
			}
			go func() {
				defer s.forget(c)
				h.Serve(ctx, c)
			}()
		},
	}.Serve(l)
}

// ServeConn serves nc, whose state is st, on the calling goroutine: serve
// gets a context that ends with ctx, with Close and when serve returns;
// Close also closes nc. When serve returns nc is closed and forgotten.
// On a closed server ServeConn closes nc without calling serve.
func (s *Server[C]) ServeConn(ctx context.Context, nc net.Conn, st C, serve func(ctx context.Context, c *Conn[C])) {
	c, ctx, ok := s.track(ctx, nc, s.ids.Add(1), st)
	if !ok {
		return
	}
	defer s.forget(c)
	serve(ctx, c)
}

// track registers nc so that Close can end it; false means the server is
// closed (nc is closed then).
func (s *Server[C]) track(parent context.Context, nc net.Conn, id int64, st C) (*Conn[C], context.Context, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		nc.Close()
		return nil, nil, false
	}
	if s.conns == nil {
		s.conns = make(map[*Conn[C]]struct{})
	}
	ctx, cancel := context.WithCancel(parent)
	c := &Conn[C]{NC: nc, ID: id, State: st, cancel: cancel}
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	return c, ctx, true
}

func (s *Server[C]) forget(c *Conn[C]) {
	c.NC.Close()
	c.cancel()
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	s.wg.Done()
}

// Go runs f on a goroutine that Close waits for, and reports whether it
// did: on a closed server it does not. f should return once Done is
// closed.
func (s *Server[C]) Go(f func()) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		f()
	}()
	return true
}

// Done is closed when Close begins.
func (s *Server[C]) Done() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done == nil {
		s.done = make(chan struct{})
	}
	return s.done
}

// Closed reports whether Close was called.
func (s *Server[C]) Closed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// Conns calls f for each connection being served, under the server's
// lock: f must not call the Server's methods.
func (s *Server[C]) Conns(f func(c *Conn[C])) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		f(c)
	}
}

// Listeners calls f for each listener being served and its ID, under the
// server's lock: f must not call the Server's methods.
func (s *Server[C]) Listeners(f func(l net.Listener, id int64)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for l, id := range s.listeners {
		f(l, id)
	}
}

// Close stops every Serve, cancels every connection's context and closes
// the connection, then waits until every connection's serve and every Go
// function has returned. It reports whether this call closed the server;
// a later call only waits.
func (s *Server[C]) Close() (first bool) {
	s.mu.Lock()
	first = !s.closed
	if first {
		s.closed = true
		if s.done == nil {
			s.done = make(chan struct{})
		}
		close(s.done)
		for l := range s.listeners {
			l.Close()
		}
		for c := range s.conns {
			c.cancel()
			c.NC.Close()
		}
	}
	s.mu.Unlock()
	s.wg.Wait()
	return first
}
