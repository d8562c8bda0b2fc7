package rfdriver

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"rackpool/internal/inventory"
	"rackpool/internal/rf"
	"rackpool/internal/topology"
)

// fake is a small hand-written Redfish fabric manager for one fabric of
// the default rack: sessions, the fabric, its endpoints and zones (POST
// and PATCH with ETags). hook sees every request first and may answer it
// itself: that is how the tests make the manager misbehave.
type fake struct {
	t    *testing.T
	top  *topology.Topology
	fab  *inventory.Fabric
	srv  *httptest.Server
	hook func(w http.ResponseWriter, r *http.Request) bool

	mu       sync.Mutex
	token    string
	logins   int
	zones    map[string][]string // zone ID → endpoint IDs
	gen      map[string]int      // zone ID → version (the ETag)
	seq      int
	requests []string // "METHOD path" of every request
	serving  int      // requests being served now
	idle     *sync.Cond
}

const fakeFabric = "falcon1"

func newFake(t *testing.T) *fake {
	t.Helper()
	top := topology.LoadDefault()
	f := &fake{t: t, top: top, fab: top.Fabric(fakeFabric), zones: map[string][]string{}, gen: map[string]int{}}
	f.idle = sync.NewCond(&f.mu)
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

// options returns driver options for the fake with timeouts that a
// loaded machine never reaches in an exchange that is answered.
func (f *fake) options() Options {
	return Options{
		Topology: f.top, Fabric: fakeFabric, URL: f.srv.URL, User: "admin", Password: "secret-pw",
		Timeout: 30 * time.Second, RequestTimeout: 10 * time.Second,
		Logger: slog.New(slog.DiscardHandler),
	}
}

// shortOptions are options for the tests that wait for a timeout to
// expire: an operation timeout of a second, a request timeout of half.
func (f *fake) shortOptions() Options {
	o := f.options()
	o.Timeout, o.RequestTimeout = time.Second, 500*time.Millisecond
	return o
}

func (f *fake) driver(t *testing.T) *Driver {
	t.Helper()
	return f.driverWith(t, f.options())
}

func (f *fake) driverWith(t *testing.T, o Options) *Driver {
	t.Helper()
	d, err := New(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func (f *fake) setHook(h func(w http.ResponseWriter, r *http.Request) bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hook = h
}

// quiesce drops the clients' connections and waits until no request is
// being served: a request a driver gave up on (its deadline passed) cannot
// then reach the fake after the test has moved on. Under load one such
// POST was once read late, after its test had removed the hook that was
// to refuse it, and created a zone.
func (f *fake) quiesce() {
	f.srv.CloseClientConnections()
	f.mu.Lock()
	defer f.mu.Unlock()
	for f.serving > 0 {
		f.idle.Wait()
	}
}

func (f *fake) seen() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.requests)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func refs(format string, ids ...string) []map[string]string {
	out := []map[string]string{}
	for _, id := range ids {
		out = append(out, map[string]string{"@odata.id": fmt.Sprintf(format, id)})
	}
	return out
}

func (f *fake) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.requests = append(f.requests, r.Method+" "+r.URL.Path)
	hook := f.hook
	f.serving++
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		if f.serving--; f.serving == 0 {
			f.idle.Broadcast()
		}
		f.mu.Unlock()
	}()
	if hook != nil && hook(w, r) {
		return
	}
	base := "/redfish/v1/Fabrics/" + fakeFabric
	if r.Method == http.MethodPost && r.URL.Path == rf.SessionsPath {
		var cred struct{ UserName, Password string }
		_ = json.NewDecoder(r.Body).Decode(&cred)
		if cred.UserName != "admin" || cred.Password != "secret-pw" {
			writeJSON(w, http.StatusUnauthorized, map[string]any{})
			return
		}
		f.mu.Lock()
		f.logins++
		f.token = "tok" + strconv.Itoa(f.logins)
		w.Header().Set("X-Auth-Token", f.token)
		f.mu.Unlock()
		w.Header().Set("Location", rf.SessionsPath+"/1")
		writeJSON(w, http.StatusCreated, map[string]any{"Id": "1"})
		return
	}
	f.mu.Lock()
	ok := r.Header.Get("X-Auth-Token") == f.token && f.token != ""
	f.mu.Unlock()
	if !ok {
		writeJSON(w, http.StatusUnauthorized, map[string]any{})
		return
	}
	switch path := r.URL.Path; {
	case r.Method == http.MethodDelete && path == rf.SessionsPath+"/1":
		w.WriteHeader(http.StatusNoContent)
	case path == base:
		writeJSON(w, http.StatusOK, map[string]any{
			"Id": fakeFabric, "Endpoints": map[string]string{"@odata.id": base + "/Endpoints"},
			"Zones": map[string]string{"@odata.id": base + "/Zones"},
		})
	case path == base+"/Endpoints":
		var ids []string
		for _, p := range f.fab.Ports {
			ids = append(ids, p.Host.ID+"-"+p.ID)
		}
		for _, d := range f.fab.Devices {
			ids = append(ids, d.ID)
		}
		writeJSON(w, http.StatusOK, map[string]any{"Members": refs(base+"/Endpoints/%s", ids...)})
	case len(path) > len(base+"/Endpoints/") && path[:len(base+"/Endpoints/")] == base+"/Endpoints/":
		id := path[len(base+"/Endpoints/"):]
		role := "Initiator"
		if f.top.Device(id) != nil {
			role = "Target"
		}
		writeJSON(w, http.StatusOK, map[string]any{"Id": id, "ConnectedEntities": []any{map[string]any{"EntityRole": role}},
			"Status": map[string]string{"State": "Enabled", "Health": "OK"}})
	case path == base+"/Zones" && r.Method == http.MethodGet:
		f.mu.Lock()
		var ids []string
		for id := range f.zones {
			ids = append(ids, id)
		}
		f.mu.Unlock()
		slices.Sort(ids)
		writeJSON(w, http.StatusOK, map[string]any{"Members": refs(base+"/Zones/%s", ids...)})
	case path == base+"/Zones" && r.Method == http.MethodPost:
		eps, err := readEndpoints(r.Body)
		if err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]any{})
			return
		}
		f.mu.Lock()
		f.seq++
		id := "z" + strconv.Itoa(f.seq)
		f.zones[id], f.gen[id] = eps, 1
		f.mu.Unlock()
		w.Header().Set("Location", base+"/Zones/"+id)
		writeJSON(w, http.StatusCreated, map[string]any{"Id": id})
	case len(path) > len(base+"/Zones/") && path[:len(base+"/Zones/")] == base+"/Zones/":
		id := path[len(base+"/Zones/"):]
		f.mu.Lock()
		defer f.mu.Unlock()
		eps, ok := f.zones[id]
		if !ok {
			writeJSON(w, http.StatusNotFound, map[string]any{})
			return
		}
		etag := `"` + strconv.Itoa(f.gen[id]) + `"`
		if r.Method == http.MethodPatch {
			if r.Header.Get("If-Match") != etag {
				writeJSON(w, http.StatusPreconditionFailed, map[string]any{})
				return
			}
			neps, err := readEndpoints(r.Body)
			if err != nil {
				writeJSON(w, http.StatusBadRequest, map[string]any{})
				return
			}
			f.zones[id] = neps
			f.gen[id]++
			w.WriteHeader(http.StatusNoContent)
			return
		}
		w.Header().Set("ETag", etag)
		writeJSON(w, http.StatusOK, map[string]any{"Id": id, "ZoneType": "ZoneOfEndpoints",
			"Links": map[string]any{"Endpoints": refs(base+"/Endpoints/%s", eps...)}})
	default:
		writeJSON(w, http.StatusNotFound, map[string]any{})
	}
}

// readEndpoints reads Links.Endpoints of a zone body as endpoint IDs.
func readEndpoints(body io.Reader) ([]string, error) {
	var z zoneRes
	if err := json.NewDecoder(body).Decode(&z); err != nil {
		return nil, err
	}
	var out []string
	for _, l := range z.Links.Endpoints {
		out = append(out, l.last())
	}
	return out, nil
}
