package rfdriver

import (
	"context"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"rackpool/internal/fabric"
	"rackpool/internal/rf"
)

var gpu1 = fabric.Attachment{Block: "gpu1", Device: "gpu1", Host: "host1", HostPort: "pcie"}

const zonesPath = "/redfish/v1/Fabrics/" + fakeFabric + "/Zones"

// TestFakeBasics checks the driver against the fake when it behaves:
// attach, repeat, discover, detach, and a new login after the session is
// lost.
func TestFakeBasics(t *testing.T) {
	f := newFake(t)
	d := f.driver(t)
	ctx := context.Background()
	if r, err := d.Attach(ctx, gpu1); err != nil || !r.Changed {
		t.Fatalf("Attach = %+v, %v; want Changed", r, err)
	}
	if r, err := d.Attach(ctx, gpu1); err != nil || r != (fabric.Result{}) {
		t.Fatalf("repeat Attach = %+v, %v; want zero Result", r, err)
	}
	f.mu.Lock()
	f.token = "forgotten" // the manager restarted
	f.mu.Unlock()
	st, err := d.Discover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Attachments) != 1 || st.Attachments[0] != gpu1 {
		t.Fatalf("Discover = %v, want [%v]", st.Attachments, gpu1)
	}
	if st.Health["gpu1"] != fabric.OK || st.Health["host1/pcie"] != fabric.OK || st.Health["host1"] != fabric.OK {
		t.Errorf("Health = %v", st.Health)
	}
	if f.logins != 2 {
		t.Errorf("logins = %d, want 2 (one more after the 401)", f.logins)
	}
	if r, err := d.Detach(ctx, gpu1); err != nil || !r.Changed {
		t.Fatalf("Detach = %+v, %v; want Changed", r, err)
	}
	if err := d.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got := f.seen(); got[len(got)-1] != "DELETE "+rf.SessionsPath+"/1" {
		t.Errorf("last request %q, want the session's DELETE", got[len(got)-1])
	}
}

func TestNewRefusals(t *testing.T) {
	f := newFake(t)
	o := f.options()
	o.Password = "wrong"
	if _, err := New(context.Background(), o); err == nil || !strings.Contains(err.Error(), "refused") || strings.Contains(err.Error(), "wrong") {
		t.Errorf("New with a wrong password = %v; want a refusal that does not quote the password", err)
	}
	o = f.options()
	o.ManagerFabric = "nope"
	if _, err := New(context.Background(), o); err == nil || !strings.Contains(err.Error(), "no fabric nope") {
		t.Errorf("New for a fabric the manager lacks = %v", err)
	}
	o = f.options()
	o.URL = "ftp://x"
	if _, err := New(context.Background(), o); err == nil {
		t.Error("New accepted an ftp URL")
	}
	o = f.options()
	o.URL = "http://fm.example:8080"
	if _, err := New(context.Background(), o); err == nil || !strings.Contains(err.Error(), "use https") {
		t.Errorf("New with plain http to another host = %v; want a refusal", err)
	}
}

// TestTLS: the driver speaks HTTPS with the trust Options.TLS gives, and
// refuses a certificate it does not trust.
func TestTLS(t *testing.T) {
	f := newFake(t)
	ts := httptest.NewUnstartedServer(http.HandlerFunc(f.serve))
	ts.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake
	ts.StartTLS()
	defer ts.Close()
	o := f.options()
	o.URL = ts.URL
	if _, err := New(context.Background(), o); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("New against an untrusted certificate = %v; want a certificate error", err)
	}
	o.TLS = ts.Client().Transport.(*http.Transport).TLSClientConfig
	d, err := New(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Attach(context.Background(), gpu1); err != nil {
		t.Fatal(err)
	}
}

// TestBadAnswers: each misbehaviour of the manager fails Discover or
// Attach with an error naming the URL and what was wrong, bounded by the
// operation timeout, and changes nothing. The cases that wait for a
// timeout (short) run with short timeouts; the others with timeouts no
// answered exchange reaches, so that a loaded machine changes no outcome.
func TestBadAnswers(t *testing.T) {
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("the other host got %s %s with token %q", r.Method, r.URL, r.Header.Get("X-Auth-Token"))
	}))
	defer other.Close()
	onZones := func(h http.HandlerFunc) func(w http.ResponseWriter, r *http.Request) bool {
		return func(w http.ResponseWriter, r *http.Request) bool {
			if r.Method == http.MethodGet && r.URL.Path == zonesPath {
				h(w, r)
				return true
			}
			return false
		}
	}
	cases := []struct {
		name  string
		hook  func(w http.ResponseWriter, r *http.Request) bool
		op    string // discover (default) or attach
		want  []string
		short bool // the case ends in a timeout: shortOptions
	}{
		{"malformed JSON", onZones(func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte(`{"Members": [`))
		}), "", []string{zonesPath, "malformed JSON"}, false},
		{"not JSON at all", onZones(func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte(`<html>hello</html>`))
		}), "", []string{zonesPath, "malformed JSON"}, false},
		{"wrong type", onZones(func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte(`{"Members": {"@odata.id": "x"}}`))
		}), "", []string{zonesPath, "property Members is a JSON object, want an array"}, false},
		{"wrong type deep", func(w http.ResponseWriter, r *http.Request) bool {
			if strings.HasSuffix(r.URL.Path, "/Endpoints/gpu1") {
				w.Write([]byte(`{"Id": "gpu1", "Status": {"Health": 3}}`))
				return true
			}
			return false
		}, "", []string{"/Endpoints/gpu1", "property Status.Health is a JSON number, want a string"}, false},
		{"unknown health", func(w http.ResponseWriter, r *http.Request) bool {
			if strings.HasSuffix(r.URL.Path, "/Endpoints/gpu1") {
				w.Write([]byte(`{"Id": "gpu1", "Status": {"Health": "Fine"}}`))
				return true
			}
			return false
		}, "", []string{"/Endpoints/gpu1", `"Fine"`}, false},
		{"member without link", onZones(func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte(`{"Members": [{}]}`))
		}), "", []string{zonesPath, "Members[0] has no @odata.id"}, false},
		{"500 without body", onZones(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusInternalServerError)
		}), "", []string{zonesPath, "500 Internal Server Error", "no body"}, false},
		{"418 with a page", onZones(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusTeapot)
			w.Write([]byte("short and stout"))
		}), "", []string{zonesPath, "418", "short and stout"}, false},
		{"redirect to another host", onZones(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, other.URL+"/steal", http.StatusTemporaryRedirect)
		}), "", []string{zonesPath, "refusing redirect", other.URL}, false},
		{"redirect loop", onZones(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, zonesPath, http.StatusFound)
		}), "", []string{zonesPath, "redirects"}, false},
		{"huge body", onZones(func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte(`{"Members": [`))
			chunk := []byte(strings.Repeat(`{"@odata.id": "/redfish/v1/x"},`, 1000))
			for range 200 {
				w.Write(chunk)
			}
		}), "", []string{zonesPath, "larger than 4 MiB"}, false},
		{"slowloris", onZones(func(w http.ResponseWriter, r *http.Request) {
			// A space every 20 ms until the client gives up (a minute at
			// most, so that a broken client cannot hang the test).
			w.WriteHeader(http.StatusOK)
			for range 3000 {
				w.Write([]byte(" "))
				w.(http.Flusher).Flush()
				select {
				case <-r.Context().Done():
					return
				case <-time.After(20 * time.Millisecond):
				}
			}
		}), "", []string{zonesPath, "request timeout", "deadline exceeded"}, true},
		{"503 storm", onZones(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusServiceUnavailable)
		}), "attach", []string{zonesPath, "503", "deadline exceeded"}, true},
		{"endless task", func(w http.ResponseWriter, r *http.Request) bool {
			switch {
			case r.Method == http.MethodPost && r.URL.Path == zonesPath:
				w.Header().Set("Location", "/redfish/v1/TaskService/TaskMonitors/1")
				w.WriteHeader(http.StatusAccepted)
				return true
			case strings.HasPrefix(r.URL.Path, "/redfish/v1/TaskService/TaskMonitors/"):
				w.WriteHeader(http.StatusAccepted)
				return true
			}
			return false
		}, "attach", []string{"TaskMonitors/1", "still running", "not in effect"}, true},
		{"task monitor on another host", func(w http.ResponseWriter, r *http.Request) bool {
			if r.Method == http.MethodPost && r.URL.Path == zonesPath {
				w.Header().Set("Location", other.URL+"/monitor")
				w.WriteHeader(http.StatusAccepted)
				return true
			}
			return false
		}, "attach", []string{"points to another host", "not in effect"}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFake(t)
			o := f.options()
			if c.short {
				o = f.shortOptions()
			}
			d := f.driverWith(t, o)
			f.setHook(c.hook)
			began := time.Now()
			var err error
			if c.op == "attach" {
				_, err = d.Attach(context.Background(), gpu1)
			} else {
				_, err = d.Discover(context.Background())
			}
			took := time.Since(began)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "secret-pw") {
				t.Errorf("error %q quotes the password", err)
			}
			// Bounded, not timed: the operation timeout plus a request
			// timeout per retry, and a wide margin for a loaded machine.
			if limit := o.Timeout + 3*o.RequestTimeout + time.Minute; took > limit {
				t.Errorf("took %v, more than %v", took, limit)
			}
			f.quiesce()
			f.setHook(nil)
			if st, err := d.Discover(context.Background()); err != nil || len(st.Attachments) != 0 {
				t.Errorf("after the failure Discover = %v, %v; want nothing attached", st.Attachments, err)
			}
		})
	}
}

// TestEndlessTaskIsCancelled: the driver asks the manager to cancel a task
// it gave up waiting for.
func TestEndlessTaskIsCancelled(t *testing.T) {
	f := newFake(t)
	d := f.driverWith(t, f.shortOptions())
	var deleted atomic.Bool
	f.setHook(func(w http.ResponseWriter, r *http.Request) bool {
		switch {
		case r.Method == http.MethodPost && r.URL.Path == zonesPath:
			w.Header().Set("Location", "/redfish/v1/TaskService/TaskMonitors/7")
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusAccepted)
		case r.URL.Path == "/redfish/v1/TaskService/TaskMonitors/7" && r.Method == http.MethodDelete:
			deleted.Store(true)
			w.WriteHeader(http.StatusNoContent)
		case r.URL.Path == "/redfish/v1/TaskService/TaskMonitors/7":
			w.WriteHeader(http.StatusAccepted)
		default:
			return false
		}
		return true
	})
	if _, err := d.Attach(context.Background(), gpu1); err == nil {
		t.Fatal("Attach under an endless task succeeded")
	}
	if !deleted.Load() {
		t.Error("the task monitor was not DELETEd")
	}
}

// TestRefusalMapsToFabricError: a 409 with a Rackpool registry message
// maps to the fabric error, after a Base message too.
func TestRefusalMapsToFabricError(t *testing.T) {
	f := newFake(t)
	d := f.driver(t)
	f.setHook(func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method == http.MethodPost && r.URL.Path == zonesPath {
			writeJSON(w, http.StatusConflict, map[string]any{"error": map[string]any{
				"code": "Base.1.22.GeneralError", "message": "no",
				"@Message.ExtendedInfo": []any{
					map[string]any{"MessageId": "Base.1.22.PropertyValueIncorrect", "Message": "bad"},
					map[string]any{"MessageId": "Rackpool.1.0.PortBusy", "Message": "port busy"},
				}}})
			return true
		}
		return false
	})
	_, err := d.Attach(context.Background(), gpu1)
	if !errors.Is(err, fabric.ErrPortBusy) {
		t.Fatalf("Attach = %v, want ErrPortBusy", err)
	}
	var e *Error
	if !errors.As(err, &e) || e.Status != http.StatusConflict {
		t.Errorf("error %v is not an *Error with status 409", err)
	}
}

// TestLostResponse: the manager applies the attach but the connection is
// closed before the answer; the driver reads back and reports Changed,
// exactly one attachment.
func TestLostResponse(t *testing.T) {
	f := newFake(t)
	d := f.driver(t)
	var lost atomic.Int32
	f.setHook(func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method == http.MethodPost && r.URL.Path == zonesPath && lost.Add(1) == 1 {
			f.setHook(nil)
			f.serve(httptest.NewRecorder(), r) // applied...
			panic(http.ErrAbortHandler)        // ...and the answer lost
		}
		return false
	})
	r, err := d.Attach(context.Background(), gpu1)
	if err != nil || !r.Changed {
		t.Fatalf("Attach = %+v, %v; want Changed", r, err)
	}
	st, err := d.Discover(context.Background())
	if err != nil || len(st.Attachments) != 1 {
		t.Fatalf("Discover = %v, %v; want exactly one attachment", st.Attachments, err)
	}
	if n := len(f.zones); n != 1 {
		t.Errorf("%d zones, want 1", n)
	}
}

// FuzzAnswer: whatever a manager answers, reading it as an error or as a
// resource never panics, and a failure names the URL.
func FuzzAnswer(f *testing.F) {
	for _, seed := range []string{
		`{"Members": [`, `{"Members": {"@odata.id": "x"}}`, `{"Id": "gpu1", "Status": {"Health": 3}}`,
		`{"error": {"code": "Rackpool.1.0.PortBusy", "@Message.ExtendedInfo": [{"MessageId": "Rackpool.1.0.PortBusy"}]}}`,
		`{"error": {"@Message.ExtendedInfo": "no"}}`, `{"Links": {"Endpoints": [{"@odata.id": 1}]}}`, ``, `null`,
		`{"@odata.type": "#Task.v1_7_0.Task", "TaskState": "Exception", "Messages": [{"MessageId": "Rackpool.1.0.BlockInUse"}]}`,
	} {
		f.Add([]byte(seed), 409)
	}
	f.Fuzz(func(t *testing.T, body []byte, status int) {
		r := &rf.Reply{Method: "GET", URL: "https://fm.test/redfish/v1/x", Status: status, Header: http.Header{}, Body: body}
		if e := statusError(r); !strings.Contains(e.Error(), r.URL) {
			t.Errorf("statusError %q does not name the URL", e)
		}
		for _, out := range []any{&collection{}, &endpointRes{}, &zoneRes{}, &connectionRes{}, &fabricRes{}} {
			if err := r.Decode(out); err != nil && !strings.Contains(err.Error(), r.URL) {
				t.Errorf("decode error %q does not name the URL", err)
			}
		}
		_, _, _ = taskResult(r)
		var e endpointRes
		if r.Decode(&e) == nil {
			_, _ = e.Status.health()
		}
	})
}

// TestReloginAfterRestarts: a manager that restarts (forgetting every
// session) right after each of the driver's first logins, as a manager
// restarting under other clients' changes can, still serves the request
// once a session survives; one that refuses every new session fails it
// after maxRelogins logins, saying so.
func TestReloginAfterRestarts(t *testing.T) {
	for _, c := range []struct {
		name     string
		restarts int // logins whose session is forgotten at once
		wantErr  bool
	}{
		{"restarts twice", 2, false},
		{"refuses every session", 1000, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFake(t)
			d := f.driver(t) // login 1 (New reads the fabric)
			f.mu.Lock()
			base := f.logins
			f.token = "forgotten" // a restart before the next request
			f.mu.Unlock()
			f.setHook(func(w http.ResponseWriter, r *http.Request) bool {
				f.mu.Lock()
				defer f.mu.Unlock()
				if r.Method == http.MethodGet && r.Header.Get("X-Auth-Token") == f.token && f.logins-base <= c.restarts {
					f.token = "forgotten" // restarted by another client's change
				}
				return false
			})
			_, err := d.Discover(context.Background())
			f.mu.Lock()
			logins := f.logins - base
			f.mu.Unlock()
			switch {
			case c.wantErr && (err == nil || !strings.Contains(err.Error(), "401 Unauthorized after logging in 3 times")):
				t.Fatalf("Discover = %v; want a 401 after 3 logins", err)
			case c.wantErr && logins != maxRelogins:
				t.Fatalf("%d logins, want %d", logins, maxRelogins)
			case !c.wantErr && err != nil:
				t.Fatalf("Discover after %d restarts = %v; want it served", c.restarts, err)
			}
		})
	}
}
