package oem

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"rackpool/internal/lease"
	"rackpool/internal/memory"
	"rackpool/internal/redfish/service"
	"rackpool/internal/rf"
	"rackpool/internal/tenancy"
)

// leases is a hand-written Leases: register answers registrations, the
// rest is what the memory routes read back.
type leases struct {
	register func(lease.Registration) (lease.Registered, error)
	nodes    map[string]lease.NodeInfo
}

func (l *leases) Register(_ context.Context, r lease.Registration) (lease.Registered, error) {
	return l.register(r)
}
func (l *leases) Nodes() []lease.NodeInfo {
	var out []lease.NodeInfo
	for _, n := range l.nodes {
		out = append(out, n)
	}
	return out
}
func (l *leases) Node(id string) (lease.NodeInfo, error) {
	if n, ok := l.nodes[id]; ok {
		return n, nil
	}
	return lease.NodeInfo{}, lease.ErrNotFound
}
func (l *leases) Grant(context.Context, lease.Request) (lease.Grant, error) {
	return lease.Grant{}, lease.ErrNoMemory
}
func (l *leases) Renew(context.Context, string, string, time.Duration) (lease.Grant, error) {
	return lease.Grant{}, lease.ErrNotFound
}
func (l *leases) Release(context.Context, string, string) error { return lease.ErrNotFound }
func (l *leases) Get(string, string) (lease.Lease, error)       { return lease.Lease{}, lease.ErrNotFound }
func (l *leases) List(string) []lease.Lease                     { return nil }

// recorder is a UsageRecorder that keeps what it is given.
type recorder struct {
	node  string
	usage map[string]uint64
}

func (r *recorder) RecordLeaseUsage(node string, usage map[string]uint64) {
	r.node, r.usage = node, usage
}

// notes records the audit detail noted.
type notes struct{ detail string }

func (n *notes) Detail(d string) { n.detail = d }
func (n *notes) Routine()        {}

func callMemory(t *testing.T, s *Memory, pattern, body string, vals map[string]string) (*httptest.ResponseRecorder, *notes, error) {
	t.Helper()
	for _, rt := range MemoryRoutes {
		if rt.Pattern != pattern {
			continue
		}
		method, _, _ := strings.Cut(pattern, " ")
		r := httptest.NewRequest(method, "/x", strings.NewReader(body))
		n := &notes{}
		r = r.WithContext(service.WithNotes(service.WithPrincipal(r.Context(), tenancy.Principal{User: "root"}), n))
		for k, v := range vals {
			r.SetPathValue(k, v)
		}
		w := httptest.NewRecorder()
		return w, n, rt.Handler(s, w, r)
	}
	t.Fatalf("no route %q", pattern)
	return nil, nil, nil
}

const registerNode = "POST /redfish/v1/Oem/Rackpool/MemoryNodes"

func TestRegisterMemoryNode(t *testing.T) {
	var got lease.Registration
	l := &leases{nodes: map[string]lease.NodeInfo{"mem-0": {Node: lease.Node{ID: "mem-0", Endpoint: "10.0.0.1:7000", Capacity: 1 << 30}, Online: true}}}
	l.register = func(r lease.Registration) (lease.Registered, error) {
		got = r
		return lease.Registered{Node: lease.Node{ID: "mem-0", Endpoint: r.Endpoint}, Key: memory.Key("k3y"),
			Usage: map[string]uint64{"lease-1": 4096}}, nil
	}
	rec := &recorder{}
	s := NewMemory(l, rec)
	w, n, err := callMemory(t, s, registerNode, `{"Endpoint":"10.0.0.1:7000","CapacityBytes":1073741824,"LeaseUsage":[{"Lease":"lease-1","BytesInUse":4096},{"Lease":"lease-x","BytesInUse":1}]}`, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.Endpoint != "10.0.0.1:7000" || got.Capacity != 1<<30 || got.Usage["lease-x"] != 1 {
		t.Fatalf("registered %+v", got)
	}
	// What the manager accepted of the report is recorded, not the report.
	if rec.node != "mem-0" || len(rec.usage) != 1 || rec.usage["lease-1"] != 4096 {
		t.Fatalf("recorded %q %v", rec.node, rec.usage)
	}
	var body map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
		t.Fatal(err)
	}
	if body["TokenKey"] != "azN5" || w.Header().Get("Location") != "/redfish/v1/Oem/Rackpool/MemoryNodes/mem-0" {
		t.Fatalf("answer %s, Location %q", w.Body, w.Header().Get("Location"))
	}
	if n.detail != "memory node mem-0 at 10.0.0.1:7000" || strings.Contains(n.detail, "azN5") {
		t.Fatalf("audit detail %q", n.detail)
	}
	for _, tc := range []struct{ body, want string }{
		{`{"CapacityBytes":1}`, rf.Registry + "PropertyMissing"},
		{`{"Endpoint":"e"}`, rf.Registry + "PropertyMissing"},
		{`{"Endpoint":"e","CapacityBytes":1,"LeaseUsage":[{"Lease":"a"},{"Lease":"a"}]}`, rf.Registry + "PropertyValueIncorrect"},
	} {
		if _, _, err := callMemory(t, s, registerNode, tc.body, nil); problemID(err) != tc.want {
			t.Errorf("%s: err %v, want %s", tc.body, err, tc.want)
		}
	}
}

func TestNoMemoryService(t *testing.T) {
	s := NewMemory(nil, &recorder{})
	for _, rt := range MemoryRoutes {
		_, _, err := callMemory(t, s, rt.Pattern, `{}`, map[string]string{"id": "x"})
		if problemID(err) != rf.Registry+"ResourceMissingAtURI" {
			t.Errorf("%s: err %v", rt.Pattern, err)
		}
	}
}

func TestTranslateLease(t *testing.T) {
	for _, tc := range []struct {
		err    error
		status int
		id     string
	}{
		{fmt.Errorf("lease x: %w", lease.ErrNotFound), http.StatusNotFound, "ResourceMissingAtURI"},
		{lease.ErrBadInput, http.StatusBadRequest, "GeneralError"},
		{lease.ErrNoMemory, http.StatusConflict, "ResourceExhaustion"},
		{lease.ErrExpired, http.StatusConflict, "ResourceInUse"},
		{lease.ErrReclaimed, http.StatusConflict, "ResourceInUse"},
		{lease.ErrConflict, http.StatusConflict, "ResourceInUse"},
	} {
		p, ok := TranslateLease(tc.err)
		if !ok || p.Status != tc.status || p.ID != rf.Registry+tc.id || p.Resolution == "" {
			t.Errorf("TranslateLease(%v) = %+v, %v", tc.err, p, ok)
		}
	}
	if _, ok := TranslateLease(errors.New("other")); ok {
		t.Error("an error not the lease manager's was translated")
	}
}

func TestTTLOf(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	for _, tc := range []struct {
		in   *float64
		want time.Duration
		bad  bool
	}{
		{nil, 0, false}, {f(1.5), 1500 * time.Millisecond, false}, {f(0), 0, true}, {f(-5), 0, true}, {f(1e300), 0, true}, {f(1e-12), 0, true},
	} {
		got, err := ttlOf(tc.in)
		if got != tc.want || (err != nil) != tc.bad {
			t.Errorf("ttlOf(%v) = %v, %v", tc.in, got, err)
		}
	}
}
