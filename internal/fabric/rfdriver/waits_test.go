package rfdriver

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"rackpool/internal/fabric"
	"rackpool/internal/rf"
)

// stall is a fake hook that holds the requests it matches until release
// (or the test's end), telling arrived about each one.
type stall struct {
	arrived chan string
	gate    chan struct{}
	once    sync.Once
}

func newStall(t *testing.T, f *fake, match func(r *http.Request) bool) *stall {
	s := &stall{arrived: make(chan string, 16), gate: make(chan struct{})}
	f.setHook(func(w http.ResponseWriter, r *http.Request) bool {
		if !match(r) {
			return false
		}
		s.arrived <- r.Method + " " + r.URL.Path
		select {
		case <-s.gate:
		case <-r.Context().Done():
		}
		http.Error(w, "stalled", http.StatusServiceUnavailable)
		return true
	})
	t.Cleanup(s.release) // before the fake's Close, which waits for its handlers
	return s
}

func (s *stall) release() { s.once.Do(func() { close(s.gate) }) }

// await waits for a stalled request to arrive.
func (s *stall) await(t *testing.T, what string) {
	t.Helper()
	select {
	case <-s.arrived:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s never reached the manager", what)
	}
}

// within runs op and fails the test when it has not returned after
// bound: op is then left running, and the test says what it waited for.
func within(t *testing.T, bound time.Duration, what string, op func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- op() }()
	select {
	case err := <-done:
		return err
	case <-time.After(bound):
		t.Fatalf("%s: still waiting after %s although its context ended long before", what, bound)
		return nil
	}
}

// TestChangeWaitsForItsPortWithinItsDeadline: an Attach behind another
// change of the same host port waits for it only until its own context
// ends, and says what it waited for.
func TestChangeWaitsForItsPortWithinItsDeadline(t *testing.T) {
	f := newFake(t)
	d := f.driver(t)
	st := newStall(t, f, func(r *http.Request) bool {
		return r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/Zones")
	})
	first := fabric.Attachment{Block: "gpu1", Device: "gpu1", Host: "host1", HostPort: "pcie"}
	second := fabric.Attachment{Block: "gpu2", Device: "gpu2", Host: "host1", HostPort: "pcie"}
	bg, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	go func() { _, _ = d.Attach(bg, first) }()
	st.await(t, "the first Attach's POST")

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err := within(t, 5*time.Second, "Attach behind a change of the same port", func() error {
		_, err := d.Attach(ctx, second)
		return err
	})
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "waiting for the change in progress on host port host1/pcie") {
		t.Fatalf("Attach behind a change of the same port = %v, want the deadline, saying what it waited for", err)
	}
	st.release()
}

// TestLoginWaitsWithinItsDeadline: while one request logs in again (its
// session was refused), another waits for that login only until its own
// context ends: the login in progress holds no lock the others need.
func TestLoginWaitsWithinItsDeadline(t *testing.T) {
	f := newFake(t)
	d := f.driver(t)
	f.mu.Lock()
	f.token = "revoked" // every request's session is refused now: 401, log in again
	f.mu.Unlock()
	st := newStall(t, f, func(r *http.Request) bool {
		return r.Method == http.MethodPost && r.URL.Path == rf.SessionsPath
	})
	bg, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	go func() { _, _ = d.Discover(bg) }()
	st.await(t, "the login again")

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err := within(t, 5*time.Second, "Discover while another request logs in", func() error {
		_, err := d.Discover(ctx)
		return err
	})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Discover while another request logs in = %v, want the deadline", err)
	}
	st.release()
}
