package service

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"

	"rackpool/internal/compose"
	"rackpool/internal/inventory"
	"rackpool/internal/tenancy"
)

// shaper answers every shaped body with a fixed one, or itself with 304.
type shaper struct {
	http.ResponseWriter
	notModified bool
	seen        any
}

func (s *shaper) Shape(w http.ResponseWriter, v any) (any, bool) {
	s.seen = v
	if s.notModified {
		w.WriteHeader(http.StatusNotModified)
		return nil, true
	}
	return map[string]string{"shaped": "yes"}, false
}

// wrapper hides the shaper below it, as middleware does.
type wrapper struct{ http.ResponseWriter }

func (w wrapper) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func TestWriteJSON(t *testing.T) {
	for _, tc := range []struct {
		name        string
		status      int
		notModified bool
		wantStatus  int
		wantBody    string
		shaped      bool
	}{
		{"200 is shaped", http.StatusOK, false, http.StatusOK, `{"shaped":"yes"}`, true},
		{"the shaper answers itself", http.StatusOK, true, http.StatusNotModified, ``, true},
		{"201 is not shaped", http.StatusCreated, false, http.StatusCreated, `{"a":"b"}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			s := &shaper{ResponseWriter: rec, notModified: tc.notModified}
			WriteJSON(wrapper{s}, tc.status, map[string]string{"a": "b"})
			if rec.Code != tc.wantStatus || (s.seen != nil) != tc.shaped {
				t.Fatalf("status %d, shaped %v", rec.Code, s.seen != nil)
			}
			if tc.wantBody != "" && !jsonEqual(t, rec.Body.String(), tc.wantBody) {
				t.Fatalf("body %s, want %s", rec.Body, tc.wantBody)
			}
			if rec.Header().Get("OData-Version") != "4.0" {
				t.Fatal("no OData-Version")
			}
		})
	}
	// Without a shaper below it, the body goes as it is.
	rec := httptest.NewRecorder()
	WriteJSON(rec, http.StatusOK, map[string]string{"a": "b"})
	if !jsonEqual(t, rec.Body.String(), `{"a":"b"}`) {
		t.Fatalf("body %s", rec.Body)
	}
}

type notes struct {
	detail  string
	routine bool
}

func (n *notes) Detail(d string) { n.detail = d }
func (n *notes) Routine()        { n.routine = true }

func TestContext(t *testing.T) {
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	if p := Principal(r); p != (tenancy.Principal{}) {
		t.Fatalf("principal of an unadmitted request = %+v", p)
	}
	NoteRoutine(r) // without notes: nothing to note, no panic
	n := &notes{}
	p := tenancy.Principal{User: "alice", Tenant: "a"}
	r = r.WithContext(WithNotes(WithPrincipal(context.Background(), p), n))
	if got := Principal(r); got.User != "alice" || got.Tenant != "a" {
		t.Fatalf("principal = %+v", got)
	}
	NoteRoutine(r)
	if !n.routine {
		t.Fatal("NoteRoutine did not reach the notes")
	}
}

func TestISODuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "PT0S", 1500 * time.Millisecond: "PT1S", time.Minute: "PT1M", 3723 * time.Second: "PT1H2M3S", 2 * time.Hour: "PT2H",
	} {
		if got := ISODuration(d); got != want {
			t.Errorf("ISODuration(%v) = %s, want %s", d, got, want)
		}
	}
}

func TestErrQueryValue(t *testing.T) {
	p := ErrQueryValue("limit", "x")
	if p.Status != http.StatusBadRequest || p.ID == "" || len(p.Args) != 2 || p.Args[0] != "x" || p.Args[1] != "limit" {
		t.Fatalf("problem = %+v", p)
	}
}

func jsonEqual(t *testing.T, a, b string) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal([]byte(a), &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(b), &y); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(x, y)
}

// TestBlockVisible: operators see every block; a tenant sees a block it
// holds, or one with room left for another tenant, and not one whose
// every share is another tenant's.
func TestBlockVisible(t *testing.T) {
	op, acme := tenancy.Principal{User: "root"}, tenancy.Principal{User: "a", Tenant: "acme"}
	single := &inventory.Block{ID: "gpu1", MaxCompositions: 1}
	shared := &inventory.Block{ID: "mem1", MaxCompositions: 2}
	for _, tc := range []struct {
		p       tenancy.Principal
		b       *inventory.Block
		tenants []string
		want    bool
	}{
		{op, single, []string{"other"}, true},
		{acme, single, nil, true},
		{acme, single, []string{"acme"}, true},
		{acme, single, []string{"other"}, false},
		{acme, shared, []string{"other"}, true},
		{acme, shared, []string{"other", "third"}, false},
		{acme, shared, []string{"other", "acme"}, true},
	} {
		if got := BlockVisible(tc.p, tc.b, compose.BlockStatus{Tenants: tc.tenants}); got != tc.want {
			t.Errorf("BlockVisible(%q, %s (max %d), %v) = %v, want %v", tc.p.Tenant, tc.b.ID, tc.b.MaxCompositions, tc.tenants, got, tc.want)
		}
	}
}
