// Package storetest is the conformance suite every store.Store backend must
// pass. A backend's test calls Run with a function that opens the backend on
// a directory:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T, dir string) store.Store {
//			s, err := mybackend.Open(dir)
//			if err != nil {
//				t.Fatal(err)
//			}
//			return s
//		})
//	}
//
// Each subtest opens its stores on its own t.TempDir and closes them itself.
// Opening the same directory again after Close must see everything that was
// committed before (the persistence subtests check this). The Audit*
// subtests cover the audit log: ID order, filters, limits and paging,
// concurrent appends and durability across a reopen.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"rackpool/internal/inventory"
	"rackpool/internal/store"
)

// OpenFunc opens a backend on dir, failing t if it cannot.
type OpenFunc func(t *testing.T, dir string) store.Store

// Run runs the conformance suite against the backend open opens.
func Run(t *testing.T, open OpenFunc) {
	tests := []struct {
		name string
		fn   func(*testing.T, OpenFunc)
	}{
		{"RoundTrip", testRoundTrip},
		{"Versions", testVersions},
		{"Limits", testLimits},
		{"Atomicity", testAtomicity},
		{"Settings", testSettings},
		{"Concurrent", testConcurrent},
		{"Persistence", testPersistence},
		{"CanceledContext", testCanceledContext},
		{"Closed", testClosed},
		{"AuditAppend", testAuditAppend},
		{"AuditInvalid", testAuditInvalid},
		{"AuditFilters", testAuditFilters},
		{"AuditConcurrent", testAuditConcurrent},
		{"AuditPersistence", testAuditPersistence},
		{"Objects", testObjects},
		{"PlanAudit", testPlanAudit},
		{"Intent", testIntent},
		{"PlanObjects", testPlanObjects},
		{"VersionedObjects", testVersionedObjects},
		{"RecordSets", testRecordSets},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.fn(t, open) })
	}
}

// openStore opens a store on a fresh directory and closes it when the test
// ends unless the test closed it first.
func openStore(t *testing.T, open OpenFunc) store.Store {
	t.Helper()
	s := open(t, t.TempDir())
	t.Cleanup(func() { s.Close() })
	return s
}

var t0 = time.Date(2025, 3, 14, 15, 9, 26, 535897932, time.FixedZone("X", 5*3600+1800))

// comp returns a Composed composition at version 1 holding blocks (the
// first is its compute block).
func comp(id string, blocks ...string) *inventory.Composition {
	host := ""
	if len(blocks) > 0 {
		host = "host-" + blocks[0]
	}
	return &inventory.Composition{
		ID:        id,
		Name:      "name-" + id,
		Host:      host,
		Blocks:    blocks,
		State:     inventory.Composed,
		Version:   1,
		CreatedAt: t0,
		UpdatedAt: t0,
	}
}

// next returns a copy of c at the following version.
func next(c *inventory.Composition) *inventory.Composition {
	n := c.Clone()
	n.Version++
	n.UpdatedAt = n.UpdatedAt.Add(time.Second + 7)
	return n
}

func apply(t *testing.T, s store.Store, p store.Plan) {
	t.Helper()
	if err := s.Apply(context.Background(), p); err != nil {
		t.Fatalf("Apply: %v", err)
	}
}

func put(cs ...*inventory.Composition) store.Plan { return store.Plan{Put: cs} }

func all(t *testing.T, s store.Store) []*inventory.Composition {
	t.Helper()
	cs, err := s.Compositions(context.Background())
	if err != nil {
		t.Fatalf("Compositions: %v", err)
	}
	return cs
}

// diff describes how got differs from want, or returns "" if they are the
// same composition. Empty and nil slices are the same; times must be equal
// instants and in UTC.
func diff(got, want *inventory.Composition) string {
	var d []string
	f := func(field string, g, w any) {
		d = append(d, fmt.Sprintf("%s: got %v, want %v", field, g, w))
	}
	if got.ID != want.ID {
		f("ID", got.ID, want.ID)
	}
	if got.Name != want.Name {
		f("Name", got.Name, want.Name)
	}
	if got.Host != want.Host {
		f("Host", got.Host, want.Host)
	}
	if got.State != want.State {
		f("State", got.State, want.State)
	}
	if got.Version != want.Version {
		f("Version", got.Version, want.Version)
	}
	if got.Description != want.Description {
		f("Description", got.Description, want.Description)
	}
	if gp, wp := got.Power, want.Power; gp.State != wp.State || gp.Reset != wp.Reset || gp.Boot != wp.Boot || !gp.Since.Equal(wp.Since) {
		f("Power", gp, wp)
	}
	for _, l := range []struct {
		name      string
		got, want []string
	}{
		{"Blocks", got.Blocks, want.Blocks},
		{"Adding", got.Adding, want.Adding},
		{"Removing", got.Removing, want.Removing},
	} {
		if !slices.Equal(l.got, l.want) {
			f(l.name, l.got, l.want)
		}
	}
	for _, tm := range []struct {
		name      string
		got, want time.Time
	}{
		{"CreatedAt", got.CreatedAt, want.CreatedAt},
		{"UpdatedAt", got.UpdatedAt, want.UpdatedAt},
	} {
		if !tm.got.Equal(tm.want) {
			f(tm.name, tm.got.Format(time.RFC3339Nano), tm.want.Format(time.RFC3339Nano))
		}
		if tm.got.Location() != time.UTC {
			f(tm.name+" location", tm.got.Location(), time.UTC)
		}
	}
	if len(d) == 0 {
		return ""
	}
	return fmt.Sprintf("composition %s: %v", want.ID, d)
}

// expect fails t unless s holds exactly want, in order.
func expect(t *testing.T, s store.Store, want ...*inventory.Composition) {
	t.Helper()
	got := all(t, s)
	if len(got) != len(want) {
		ids := func(cs []*inventory.Composition) []string {
			var out []string
			for _, c := range cs {
				out = append(out, fmt.Sprintf("%s@%d", c.ID, c.Version))
			}
			return out
		}
		t.Fatalf("store holds %v, want %v", ids(got), ids(want))
	}
	for i := range want {
		if d := diff(got[i], want[i]); d != "" {
			t.Error(d)
		}
	}
}

func testRoundTrip(t *testing.T, open OpenFunc) {
	s := openStore(t, open)
	ctx := context.Background()
	if cs := all(t, s); len(cs) != 0 {
		t.Fatalf("new store holds %d compositions", len(cs))
	}
	full := &inventory.Composition{
		ID:          "c-b",
		Name:        "training node",
		Host:        "h1",
		Blocks:      []string{"h1-compute", "gpu-1", "nvme-3"},
		State:       inventory.Updating,
		Adding:      []string{"gpu-2"},
		Removing:    []string{"nvme-3"},
		Version:     1,
		CreatedAt:   t0,
		UpdatedAt:   t0.Add(time.Hour + 123456789),
		Description: "all fields — ünïcode, \"quotes\", 'apostrophes'",
		Power: inventory.Power{State: inventory.PowerPoweringOn, Reset: "On", Since: t0.Add(time.Minute),
			Boot: inventory.Boot{Enabled: "Once", Target: "UefiTarget", Mode: "UEFI", UefiTarget: "/0x31/0x33/0x01/0x01", BootNext: "nvme1"}},
	}
	bare := &inventory.Composition{ID: "c-a", State: inventory.Composing, Version: 1}
	apply(t, s, put(full, bare))
	expect(t, s, bare, full)

	// Returned compositions belong to the caller.
	cs := all(t, s)
	cs[1].Blocks[0] = "changed"
	cs[1].State = inventory.Decomposing
	expect(t, s, bare, full)

	// The caller's compositions were not retained either.
	keep := full.Clone()
	full.Blocks[1] = "changed"
	expect(t, s, bare, keep)

	u := next(keep)
	u.State = inventory.Composed
	u.Blocks = []string{"h1-compute", "gpu-1", "gpu-2"}
	u.Adding, u.Removing = nil, nil
	apply(t, s, put(u))
	expect(t, s, bare, u)

	if err := s.Apply(ctx, store.Plan{}); err != nil {
		t.Fatalf("empty plan: %v", err)
	}
	expect(t, s, bare, u)
}

func testVersions(t *testing.T, open OpenFunc) {
	a := comp("a", "ha", "x")
	a2 := next(a)
	a3 := next(a2)
	tests := []struct {
		name string
		plan store.Plan
		ok   bool
	}{
		{"insert existing", put(comp("a", "hz")), false},
		{"update to same version", put(a.Clone()), false},
		{"update skipping a version", put(a3), false},
		{"update missing", put(next(comp("zz", "hz"))), false},
		{"delete wrong version", store.Plan{Delete: []store.Deletion{{ID: "a", Version: 2}}}, false},
		{"delete older version", store.Plan{Delete: []store.Deletion{{ID: "a", Version: 0}}}, false},
		{"delete missing", store.Plan{Delete: []store.Deletion{{ID: "zz", Version: 1}}}, false},
		{"update", put(a2), true},
		{"delete", store.Plan{Delete: []store.Deletion{{ID: "a", Version: 1}}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := openStore(t, open)
			b := comp("b", "hb", "y")
			apply(t, s, put(a, b))
			err := s.Apply(context.Background(), tt.plan)
			if tt.ok {
				if err != nil {
					t.Fatalf("Apply: %v", err)
				}
				return
			}
			if !errors.Is(err, store.ErrConflict) {
				t.Fatalf("Apply = %v, want ErrConflict", err)
			}
			expect(t, s, a, b)
		})
	}
	t.Run("sequence", func(t *testing.T) {
		s := openStore(t, open)
		c := comp("c", "hc")
		apply(t, s, put(c))
		for range 5 {
			c = next(c)
			apply(t, s, put(c))
		}
		expect(t, s, c)
		apply(t, s, store.Plan{Delete: []store.Deletion{{ID: "c", Version: 6}}})
		expect(t, s)
		// A deleted ID can be created again.
		apply(t, s, put(comp("c", "hc")))
		expect(t, s, comp("c", "hc"))
	})
}

func testLimits(t *testing.T, open OpenFunc) {
	adding := func(id string, blocks []string, add ...string) *inventory.Composition {
		c := comp(id, blocks...)
		c.State = inventory.Updating
		c.Adding = add
		return c
	}
	tests := []struct {
		name   string
		before []*inventory.Composition // applied first, one plan each
		plan   store.Plan
		ok     bool
	}{
		{
			name:   "exclusive block taken",
			before: []*inventory.Composition{comp("a", "ha", "gpu")},
			plan:   put(comp("b", "hb", "gpu")),
		},
		{
			name: "exclusive block twice in one plan",
			plan: put(comp("a", "ha", "x"), comp("b", "hb", "y"), comp("c", "hc", "x")),
		},
		{
			name:   "violation inside a multi-composition plan",
			before: []*inventory.Composition{comp("a", "ha", "gpu"), comp("d", "hd", "fpga")},
			plan: store.Plan{
				Put:    []*inventory.Composition{comp("b", "hb", "nvme"), comp("c", "hc", "gpu")},
				Delete: []store.Deletion{{ID: "d", Version: 1}},
			},
		},
		{
			name:   "limit violated by the last of several puts",
			before: []*inventory.Composition{comp("a", "ha", "gpu"), comp("d", "hd", "fpga")},
			plan: store.Plan{
				Put: []*inventory.Composition{comp("b", "hb", "nvme"), next(comp("d", "hd")), comp("c", "hc", "gpu")},
			},
		},
		{
			name:   "unlisted block defaults to one",
			before: []*inventory.Composition{comp("a", "ha", "nic")},
			plan:   store.Plan{Put: []*inventory.Composition{comp("b", "hb", "nic")}, Limits: map[string]int{"other": 4}},
		},
		{
			name:   "shareable within limit",
			before: []*inventory.Composition{comp("a", "ha", "mem")},
			plan:   store.Plan{Put: []*inventory.Composition{comp("b", "hb", "mem")}, Limits: map[string]int{"mem": 2}},
			ok:     true,
		},
		{
			name:   "shareable over limit",
			before: []*inventory.Composition{comp("a", "ha", "mem"), comp("b", "hb", "mem")},
			plan:   store.Plan{Put: []*inventory.Composition{comp("c", "hc", "mem")}, Limits: map[string]int{"mem": 2}},
		},
		{
			name: "shareable over limit in one plan",
			plan: store.Plan{
				Put:    []*inventory.Composition{comp("a", "ha", "mem"), comp("b", "hb", "mem"), comp("c", "hc", "mem")},
				Limits: map[string]int{"mem": 2},
			},
		},
		{
			name:   "adding counts toward the limit",
			before: []*inventory.Composition{adding("a", []string{"ha"}, "gpu")},
			plan:   put(comp("b", "hb", "gpu")),
		},
		{
			name:   "adding conflicts with a held block",
			before: []*inventory.Composition{comp("a", "ha", "gpu")},
			plan:   put(adding("b", []string{"hb"}, "gpu")),
		},
		{
			name:   "update adding a taken block",
			before: []*inventory.Composition{comp("a", "ha", "gpu"), comp("b", "hb")},
			plan:   put(next(adding("b", []string{"hb"}, "gpu"))),
		},
		{
			name: "block in both Blocks and Adding counts once",
			plan: put(adding("a", []string{"ha", "gpu"}, "gpu")),
			ok:   true,
		},
		{
			name:   "released block can be taken in the same plan",
			before: []*inventory.Composition{comp("a", "ha", "gpu")},
			plan: store.Plan{
				Put:    []*inventory.Composition{comp("b", "hb", "gpu")},
				Delete: []store.Deletion{{ID: "a", Version: 1}},
			},
			ok: true,
		},
		{
			name:   "block moved between compositions in one plan",
			before: []*inventory.Composition{comp("a", "ha", "gpu"), comp("b", "hb")},
			plan: func() store.Plan {
				a, b := next(comp("a", "ha")), next(comp("b", "hb", "gpu"))
				return put(a, b)
			}(),
			ok: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := openStore(t, open)
			for _, c := range tt.before {
				apply(t, s, store.Plan{Put: []*inventory.Composition{c}, Limits: tt.plan.Limits})
			}
			before := all(t, s)
			err := s.Apply(context.Background(), tt.plan)
			if tt.ok {
				if err != nil {
					t.Fatalf("Apply: %v", err)
				}
				return
			}
			if !errors.Is(err, store.ErrConflict) {
				t.Fatalf("Apply = %v, want ErrConflict", err)
			}
			expect(t, s, before...)
		})
	}

	t.Run("released block is free", func(t *testing.T) {
		s := openStore(t, open)
		a := comp("a", "ha", "gpu")
		apply(t, s, put(a))
		a2 := next(a)
		a2.Blocks = []string{"ha"}
		apply(t, s, put(a2))
		apply(t, s, put(comp("b", "hb", "gpu")))
		apply(t, s, store.Plan{Delete: []store.Deletion{{ID: "b", Version: 1}}})
		apply(t, s, put(comp("c", "hc", "gpu")))
		expect(t, s, a2, comp("c", "hc", "gpu"))
	})
}

func testAtomicity(t *testing.T, open OpenFunc) {
	s := openStore(t, open)
	a, b := comp("a", "ha"), comp("b", "hb")
	apply(t, s, put(a, b))

	// A good put and a bad delete: neither happens.
	err := s.Apply(context.Background(), store.Plan{
		Put:    []*inventory.Composition{comp("c", "hc"), next(a)},
		Delete: []store.Deletion{{ID: "b", Version: 9}},
	})
	if !errors.Is(err, store.ErrConflict) {
		t.Fatalf("Apply = %v, want ErrConflict", err)
	}
	expect(t, s, a, b)

	// A bad put after good ones and a good delete: nothing happens.
	err = s.Apply(context.Background(), store.Plan{
		Put:    []*inventory.Composition{comp("c", "hc"), next(a), next(comp("zz", "hz"))},
		Delete: []store.Deletion{{ID: "b", Version: 1}},
	})
	if !errors.Is(err, store.ErrConflict) {
		t.Fatalf("Apply = %v, want ErrConflict", err)
	}
	expect(t, s, a, b)

	// Put and delete in one plan both happen.
	a2 := next(a)
	apply(t, s, store.Plan{
		Put:    []*inventory.Composition{comp("c", "hc"), a2},
		Delete: []store.Deletion{{ID: "b", Version: 1}},
	})
	expect(t, s, a2, comp("c", "hc"))
}

func testSettings(t *testing.T, open OpenFunc) {
	s := openStore(t, open)
	ctx := context.Background()
	get := func(key string) (string, bool) {
		t.Helper()
		v, ok, err := s.Setting(ctx, key)
		if err != nil {
			t.Fatalf("Setting(%q): %v", key, err)
		}
		return v, ok
	}
	set := func(key, value string) {
		t.Helper()
		if err := s.PutSetting(ctx, key, value); err != nil {
			t.Fatalf("PutSetting(%q): %v", key, err)
		}
	}
	if v, ok := get("admin"); ok {
		t.Fatalf("Setting(admin) = %q before any put", v)
	}
	steps := []struct {
		key, value string
	}{
		{"admin", "$2a$10$hash"},
		{"empty", ""},
		{"admin", "$2a$10$other"},
		{"ünï", "line1\nline2\x00nul"},
	}
	want := map[string]string{}
	for _, st := range steps {
		set(st.key, st.value)
		want[st.key] = st.value
		for k, w := range want {
			if v, ok := get(k); !ok || v != w {
				t.Fatalf("after PutSetting(%q): Setting(%q) = %q, %v; want %q, true", st.key, k, v, ok, w)
			}
		}
	}
	if v, ok := get("missing"); ok {
		t.Fatalf("Setting(missing) = %q, true", v)
	}
}

func testConcurrent(t *testing.T, open OpenFunc) {
	s := openStore(t, open)
	const (
		workers = 16
		rounds  = 20
	)
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		winners []*inventory.Composition
		errs    = make(chan error, workers*2)
	)
	ctx := context.Background()
	for w := range workers {
		wg.Go(func() {
			// Contend for the exclusive block "prize".
			c := comp(fmt.Sprintf("contender-%02d", w), fmt.Sprintf("hc-%d", w), "prize")
			switch err := s.Apply(ctx, put(c)); {
			case err == nil:
				mu.Lock()
				winners = append(winners, c)
				mu.Unlock()
			case !errors.Is(err, store.ErrConflict):
				errs <- fmt.Errorf("contender %d: %w", w, err)
				return
			}
			// Churn through compositions of one's own.
			for r := range rounds {
				id := fmt.Sprintf("w%02d-%03d", w, r)
				c := comp(id, "h-"+id, "b-"+id)
				if err := s.Apply(ctx, put(c)); err != nil {
					errs <- fmt.Errorf("insert %s: %w", id, err)
					return
				}
				c2 := next(c)
				c2.Blocks = append(c2.Blocks, "b2-"+id)
				if err := s.Apply(ctx, put(c2)); err != nil {
					errs <- fmt.Errorf("update %s: %w", id, err)
					return
				}
				if r%2 == 0 {
					continue
				}
				if err := s.Apply(ctx, store.Plan{Delete: []store.Deletion{{ID: id, Version: 2}}}); err != nil {
					errs <- fmt.Errorf("delete %s: %w", id, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if len(winners) != 1 {
		var ids []string
		for _, c := range winners {
			ids = append(ids, c.ID)
		}
		t.Fatalf("%d contenders won the exclusive block: %v", len(ids), ids)
	}
	var want []*inventory.Composition
	for w := range workers {
		for r := 0; r < rounds; r += 2 {
			id := fmt.Sprintf("w%02d-%03d", w, r)
			c := next(comp(id, "h-"+id, "b-"+id))
			c.Blocks = append(c.Blocks, "b2-"+id)
			want = append(want, c)
		}
	}
	want = append([]*inventory.Composition{winners[0]}, want...)
	expect(t, s, want...)

	// The winner's block is still exclusive.
	if err := s.Apply(ctx, put(comp("late", "hl", "prize"))); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("late contender: Apply = %v, want ErrConflict", err)
	}
}

func testPersistence(t *testing.T, open OpenFunc) {
	dir := t.TempDir()
	ctx := context.Background()
	s := open(t, dir)
	a, b := comp("a", "ha", "gpu"), comp("b", "hb", "mem")
	a.Adding = []string{"nvme"}
	a.State = inventory.Updating
	apply(t, s, put(a, b))
	b2 := next(b)
	apply(t, s, store.Plan{Put: []*inventory.Composition{b2}})
	if err := s.PutSetting(ctx, "admin", "hash"); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	s = open(t, dir)
	t.Cleanup(func() { s.Close() })
	expect(t, s, a, b2)
	if v, ok, err := s.Setting(ctx, "admin"); err != nil || !ok || v != "hash" {
		t.Fatalf("Setting(admin) = %q, %v, %v after reopen", v, ok, err)
	}
	// Allocations survived too: nvme (being added to a) is still taken.
	if err := s.Apply(ctx, put(comp("c", "hc", "nvme"))); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("Apply after reopen = %v, want ErrConflict", err)
	}
}

func testCanceledContext(t *testing.T, open OpenFunc) {
	s := openStore(t, open)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Apply(ctx, put(comp("a", "ha"))); !errors.Is(err, context.Canceled) {
		t.Fatalf("Apply = %v, want context.Canceled", err)
	}
	expect(t, s)
	if _, err := s.AppendAudit(ctx, auditEntry(1, "a", "", store.AuditSuccess)); !errors.Is(err, context.Canceled) {
		t.Fatalf("AppendAudit = %v, want context.Canceled", err)
	}
	if n := auditCount(t, s); n != 0 {
		t.Fatalf("AuditCount = %d after a canceled AppendAudit", n)
	}
}

func testClosed(t *testing.T, open OpenFunc) {
	s := open(t, t.TempDir())
	apply(t, s, put(comp("a", "ha")))
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	ctx := context.Background()
	if err := s.Apply(ctx, put(comp("b", "hb"))); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Apply after Close = %v, want ErrClosed", err)
	}
	if err := s.PutSetting(ctx, "k", "v"); !errors.Is(err, store.ErrClosed) {
		t.Errorf("PutSetting after Close = %v, want ErrClosed", err)
	}
	if _, err := s.Compositions(ctx); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Compositions after Close = %v, want ErrClosed", err)
	}
	if _, _, err := s.Setting(ctx, "k"); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Setting after Close = %v, want ErrClosed", err)
	}
	if _, err := s.AppendAudit(ctx, auditEntry(1, "a", "", store.AuditSuccess)); !errors.Is(err, store.ErrClosed) {
		t.Errorf("AppendAudit after Close = %v, want ErrClosed", err)
	}
	if _, err := s.Audit(ctx, store.AuditQuery{}); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Audit after Close = %v, want ErrClosed", err)
	}
	if _, err := s.AuditCount(ctx); !errors.Is(err, store.ErrClosed) {
		t.Errorf("AuditCount after Close = %v, want ErrClosed", err)
	}
}

// testPlanAudit: audit entries in a plan are committed with it or not at
// all, get IDs in order with those AppendAudit assigns, and an invalid one
// fails the whole plan.
func testPlanAudit(t *testing.T, open OpenFunc) {
	s := openStore(t, open)
	ctx := context.Background()
	if _, err := s.AppendAudit(ctx, auditEntry(1, "alice", "", store.AuditSuccess)); err != nil {
		t.Fatal(err)
	}
	a := comp("a", "ha", "gpu")
	apply(t, s, store.Plan{Put: []*inventory.Composition{a}, Audit: []store.AuditEntry{auditEntry(2, "bob", "t1", store.AuditSuccess)}})

	// A conflicting plan leaves neither its changes nor its entry.
	err := s.Apply(ctx, store.Plan{Put: []*inventory.Composition{comp("b", "hb", "gpu")},
		Audit: []store.AuditEntry{auditEntry(3, "carol", "", store.AuditSuccess)}})
	if !errors.Is(err, store.ErrConflict) {
		t.Fatalf("conflicting plan with an audit entry: Apply = %v, want ErrConflict", err)
	}
	// An invalid entry fails the plan before anything is written.
	bad := auditEntry(4, "dave", "", "maybe")
	err = s.Apply(ctx, store.Plan{Put: []*inventory.Composition{comp("c", "hc")}, Audit: []store.AuditEntry{bad}})
	if !errors.Is(err, store.ErrInvalidAudit) {
		t.Fatalf("plan with an invalid audit entry: Apply = %v, want ErrInvalidAudit", err)
	}
	expect(t, s, a)

	// An entry alone is a plan too; entries keep their plan's order.
	apply(t, s, store.Plan{Audit: []store.AuditEntry{auditEntry(5, "erin", "", store.AuditFailure), auditEntry(6, "frank", "", store.AuditDenied)}})
	got, err := s.Audit(ctx, store.AuditQuery{})
	if err != nil {
		t.Fatal(err)
	}
	want := []store.AuditEntry{auditEntry(1, "alice", "", store.AuditSuccess), auditEntry(2, "bob", "t1", store.AuditSuccess),
		auditEntry(5, "erin", "", store.AuditFailure), auditEntry(6, "frank", "", store.AuditDenied)}
	if len(got) != len(want) {
		t.Fatalf("Audit returned %d entries, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if i > 0 && got[i].ID <= got[i-1].ID {
			t.Errorf("entry %d has ID %d after %d", i, got[i].ID, got[i-1].ID)
		}
		want[i].ID = got[i].ID
		if d := auditDiff(got[i], want[i]); d != "" {
			t.Errorf("entry %d: %s", i, d)
		}
	}
}

// testIntent: an intent plan is checked and applied like any other, is
// visible at once, and is kept across a reopen; intents and durable plans
// interleaved by concurrent writers all land.
func testIntent(t *testing.T, open OpenFunc) {
	dir := t.TempDir()
	ctx := context.Background()
	s := open(t, dir)
	a := comp("a", "ha", "gpu")
	a.State = inventory.Composing
	apply(t, s, store.Plan{Put: []*inventory.Composition{a}, Intent: true})
	expect(t, s, a)
	if err := s.Apply(ctx, store.Plan{Put: []*inventory.Composition{comp("b", "hb", "gpu")}, Intent: true}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("intent taking a held block: Apply = %v, want ErrConflict", err)
	}
	a2 := next(a)
	a2.State = inventory.Composed
	apply(t, s, put(a2))

	const writers, each = 4, 25
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				c := comp(fmt.Sprintf("w%d-%d", w, i), fmt.Sprintf("h%d-%d", w, i))
				c.State = inventory.Composing
				if err := s.Apply(ctx, store.Plan{Put: []*inventory.Composition{c}, Intent: true}); err != nil {
					errs <- err
					return
				}
				d := next(c)
				d.State = inventory.Composed
				if err := s.Apply(ctx, put(d)); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent intents: %v", err)
	}
	// The last commit is an intent: a reopen must still see it.
	last := comp("z", "hz")
	last.State = inventory.Composing
	apply(t, s, store.Plan{Put: []*inventory.Composition{last}, Intent: true})
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	s = open(t, dir)
	t.Cleanup(func() { s.Close() })
	got := all(t, s)
	if len(got) != 2+writers*each {
		t.Fatalf("after reopen: %d compositions, want %d", len(got), 2+writers*each)
	}
	for _, c := range got {
		switch {
		case c.ID == "a" && c.State != inventory.Composed, c.ID == "z" && c.State != inventory.Composing,
			c.ID != "a" && c.ID != "z" && (c.State != inventory.Composed || c.Version != 2):
			t.Errorf("after reopen: %s is %s at version %d", c.ID, c.State, c.Version)
		}
	}
}
