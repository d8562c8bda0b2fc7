package rfdriver

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"rackpool/internal/fabric"
	"rackpool/internal/fabric/fmserver"
	"rackpool/internal/topology"
)

// rack returns the default rack and a driver of falcon1 operating an
// fmserver (no chaos) whose handler is wrapped by wrap (nil: none).
func rackDriver(t *testing.T, timeout time.Duration, wrap func(*fmserver.Server, http.Handler) http.Handler) (*Driver, *fmserver.Server) {
	t.Helper()
	top := topology.LoadDefault()
	srv, err := fmserver.New(fmserver.Options{Topology: top, Fabric: "falcon1", Clock: fabricClock(top.Fabric("falcon1")),
		User: "rackpool", Password: "test-password", SessionTimeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	var h http.Handler = srv.Handler()
	if wrap != nil {
		h = wrap(srv, h)
	}
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	return newDriver(t, top, "falcon1", &manager{srv: srv, url: hs.URL}, timeout), srv
}

// truth is what the emulated fabric under the manager holds.
func truth(t *testing.T, srv *fmserver.Server) []fabric.Attachment {
	t.Helper()
	st, err := srv.Driver().Discover(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st.Attachments
}

func wantOnly(t *testing.T, d *Driver, srv *fmserver.Server, want ...fabric.Attachment) {
	t.Helper()
	st, err := d.Discover(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(st.Attachments, want) {
		t.Errorf("Discover = %v, want %v", st.Attachments, want)
	}
	if got := truth(t, srv); !slices.Equal(got, want) {
		t.Errorf("the fabric holds %v, want %v", got, want)
	}
}

// TestLoseResponseAttach: the manager applies an attach and loses the
// answer; the driver reads back, reports Changed, and attaches once.
func TestLoseResponseAttach(t *testing.T) {
	for _, op := range []string{"attach", "detach"} {
		t.Run(op, func(t *testing.T) {
			d, srv := rackDriver(t, 10*time.Second, nil)
			ctx := context.Background()
			if op == "detach" {
				if _, err := d.Attach(ctx, gpu1); err != nil {
					t.Fatal(err)
				}
			}
			if err := srv.InjectTransportFault(fmserver.LoseResponse, 1); err != nil {
				t.Fatal(err)
			}
			call := d.Attach
			if op == "detach" {
				call = d.Detach
			}
			r, err := call(ctx, gpu1)
			if err != nil || !r.Changed || r.Took <= 0 {
				t.Fatalf("%s with its answer lost = %+v, %v; want Changed with a Took", op, r, err)
			}
			if op == "attach" {
				wantOnly(t, d, srv, gpu1)
			} else {
				wantOnly(t, d, srv)
			}
			if r, err := call(ctx, gpu1); err != nil || r != (fabric.Result{}) {
				t.Fatalf("repeat %s = %+v, %v; want zero Result", op, r, err)
			}
		})
	}
}

// restartOnAccepted restarts the manager (sessions and task monitors
// forgotten) just before it sends a 202: the driver's task monitor then
// answers 404 and its token 401.
func restartOnAccepted(srv *fmserver.Server, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(&hookWriter{ResponseWriter: w, before: func(code int) {
			if code == http.StatusAccepted {
				_ = srv.InjectTransportFault(fmserver.Restart, 0)
			}
		}}, r)
	})
}

type hookWriter struct {
	http.ResponseWriter
	before func(code int)
}

func (w *hookWriter) WriteHeader(code int) {
	w.before(code)
	w.ResponseWriter.WriteHeader(code)
}

func (w *hookWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// TestRestartDuringTask: the manager restarts while the driver waits for
// a task; the monitor is gone, the session too. The driver logs in again,
// reads the state back and reports what happened.
func TestRestartDuringTask(t *testing.T) {
	d, srv := rackDriver(t, 10*time.Second, restartOnAccepted)
	ctx := context.Background()
	r, err := d.Attach(ctx, gpu1)
	if err != nil || !r.Changed {
		t.Fatalf("Attach across a restart = %+v, %v; want Changed", r, err)
	}
	wantOnly(t, d, srv, gpu1)
	if r, err := d.Detach(ctx, gpu1); err != nil || !r.Changed {
		t.Fatalf("Detach across a restart = %+v, %v; want Changed", r, err)
	}
	wantOnly(t, d, srv)
}

// TestUnavailableLongerThanTimeout: a 503 storm outlasting the operation
// timeout fails the attach with a clear error in about the timeout, and
// nothing is half done.
func TestUnavailableLongerThanTimeout(t *testing.T) {
	const timeout = 700 * time.Millisecond
	d, srv := rackDriver(t, timeout, func(_ *fmserver.Server, h http.Handler) http.Handler { return fastRetry(h) })
	if err := srv.InjectTransportFault(fmserver.Unavailable, 1<<30); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	_, err := d.Attach(context.Background(), gpu1)
	took := time.Since(began)
	if err == nil || !strings.Contains(err.Error(), "503") || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Attach in a 503 storm = %v; want a deadline error naming the 503", err)
	}
	// Not before the timeout; after it, bounded with a wide margin (a
	// loaded machine is late, never early).
	if took < timeout || took > timeout+time.Minute {
		t.Errorf("gave up after %v, want %v and not much more", took, timeout)
	}
	d.ClearFaults() // the fault actions are not subject to transport faults; this ends the storm
	wantOnly(t, d, srv)
}

// TestSessionExpiry: a session that timed out on the manager is replaced
// without the caller noticing.
func TestSessionExpiry(t *testing.T) {
	top := topology.LoadDefault()
	srv, err := fmserver.New(fmserver.Options{Topology: top, Fabric: "falcon1", Clock: fabricClock(top.Fabric("falcon1")),
		User: "rackpool", Password: "test-password", SessionTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	d := newDriver(t, top, "falcon1", &manager{srv: srv, url: hs.URL}, 10*time.Second)
	time.Sleep(100 * time.Millisecond)
	if _, err := d.Attach(context.Background(), gpu1); err != nil {
		t.Fatalf("Attach after the session expired: %v", err)
	}
	wantOnly(t, d, srv, gpu1)
}

// TestLostRefusalSpendsInjectedFault documents why chaosSeedBase is
// chosen: a refused attach whose answer is lost is sent again (the driver
// cannot tell it from a lost request), and the resend spends the next
// injected failure.
func TestLostRefusalSpendsInjectedFault(t *testing.T) {
	d, srv := rackDriver(t, 10*time.Second, nil)
	if err := d.InjectFault(fabric.Fault{Kind: fabric.AttachFails, Target: "gpu1", Count: 2}); err != nil {
		t.Fatal(err)
	}
	if err := srv.InjectTransportFault(fmserver.LoseResponse, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Attach(context.Background(), gpu1); !errors.Is(err, fabric.ErrInjected) {
		t.Fatalf("Attach = %v, want ErrInjected (from the resend)", err)
	}
	if r, err := d.Attach(context.Background(), gpu1); err != nil || !r.Changed {
		t.Fatalf("second Attach = %+v, %v; want Changed: both failures were spent", r, err)
	}
}

// TestInjectFaultUnsupported: a manager without the OEM actions says so.
func TestInjectFaultUnsupported(t *testing.T) {
	f := newFake(t)
	d := f.driver(t)
	err := d.InjectFault(fabric.Fault{Kind: fabric.DeviceFails, Target: "gpu1"})
	if err == nil || !strings.Contains(err.Error(), "not supported by this manager") {
		t.Fatalf("InjectFault on a manager without the action = %v", err)
	}
}

// TestRetryAfterHonoured: a 503 with Retry-After 1 delays the retry by a
// second.
func TestRetryAfterHonoured(t *testing.T) {
	if testing.Short() {
		t.Skip("waits a second")
	}
	f := newFake(t)
	o := f.options()
	o.Timeout = 5 * time.Second
	d, err := New(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	var done atomic.Bool
	f.setHook(func(w http.ResponseWriter, r *http.Request) bool {
		if r.URL.Path == zonesPath && done.CompareAndSwap(false, true) {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
			return true
		}
		return false
	})
	began := time.Now()
	if _, err := d.Discover(context.Background()); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(began); took < time.Second {
		t.Errorf("Discover retried after %v, before the Retry-After second", took)
	}
}
