package storetest

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"rackpool/internal/inventory"
	"rackpool/internal/store"
)

// testObjects: objects round-trip by kind, replace, delete (idempotently),
// survive a reopen, and are refused once the store is closed.
func testObjects(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	dir := t.TempDir()
	s := open(t, dir)
	buf := []byte("lease-a-v1")
	for _, o := range []struct {
		kind string
		obj  store.Object
	}{
		{"lease", store.Object{ID: "b", Data: []byte("lease-b")}},
		{"lease", store.Object{ID: "a", Data: buf}},
		{"node", store.Object{ID: "a", Data: []byte("node-a")}},
	} {
		if err := s.PutObject(ctx, o.kind, o.obj); err != nil {
			t.Fatalf("PutObject(%s, %s): %v", o.kind, o.obj.ID, err)
		}
	}
	copy(buf, "XXXXX") // the store must have kept its own copy
	if err := s.PutObject(ctx, "lease", store.Object{ID: "b", Data: []byte("lease-b-v2")}); err != nil {
		t.Fatalf("replace: %v", err)
	}
	if err := s.PutObject(ctx, "", store.Object{ID: "x"}); err == nil {
		t.Error("PutObject with no kind succeeded")
	}
	want := []store.Object{{ID: "a", Data: []byte("lease-a-v1")}, {ID: "b", Data: []byte("lease-b-v2")}}
	check := func(s store.Store, kind string, want []store.Object) {
		t.Helper()
		got, err := s.Objects(ctx, kind)
		if err != nil {
			t.Fatalf("Objects(%s): %v", kind, err)
		}
		if len(got) != len(want) {
			t.Fatalf("Objects(%s) = %d objects, want %d", kind, len(got), len(want))
		}
		for i := range want {
			if got[i].ID != want[i].ID || !bytes.Equal(got[i].Data, want[i].Data) {
				t.Errorf("Objects(%s)[%d] = %s %q, want %s %q", kind, i, got[i].ID, got[i].Data, want[i].ID, want[i].Data)
			}
		}
	}
	check(s, "lease", want)
	check(s, "node", []store.Object{{ID: "a", Data: []byte("node-a")}})
	check(s, "none", nil)
	if err := s.DeleteObject(ctx, "lease", "a"); err != nil {
		t.Fatalf("DeleteObject: %v", err)
	}
	if err := s.DeleteObject(ctx, "lease", "a"); err != nil {
		t.Fatalf("DeleteObject of an absent object: %v", err)
	}
	check(s, "lease", want[1:])
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.PutObject(ctx, "lease", store.Object{ID: "c"}); !errors.Is(err, store.ErrClosed) {
		t.Errorf("PutObject after Close = %v, want ErrClosed", err)
	}
	if _, err := s.Objects(ctx, "lease"); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Objects after Close = %v, want ErrClosed", err)
	}
	s2 := open(t, dir)
	defer s2.Close()
	check(s2, "lease", want[1:])
	check(s2, "node", []store.Object{{ID: "a", Data: []byte("node-a")}})
}

// testPlanObjects: objects put and deleted in a plan are committed with its
// compositions or not at all.
func testPlanObjects(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	dir := t.TempDir()
	s := open(t, dir)
	pool := comp("pool-a", "memA-b1")
	apply(t, s, store.Plan{Put: []*inventory.Composition{pool}, Objects: []store.ObjectChange{
		{Kind: "lease", Object: store.Object{ID: "l1", Data: []byte("one")}},
		{Kind: "lease", Object: store.Object{ID: "l2", Data: []byte("two")}},
	}})
	// A plan failing its version check leaves the objects alone.
	err := s.Apply(ctx, store.Plan{Put: []*inventory.Composition{pool}, Objects: []store.ObjectChange{
		{Kind: "lease", Object: store.Object{ID: "l1"}, Delete: true},
		{Kind: "lease", Object: store.Object{ID: "l3", Data: []byte("three")}},
	}})
	if !errors.Is(err, store.ErrConflict) {
		t.Fatalf("conflicting plan with objects: Apply = %v, want ErrConflict", err)
	}
	if err := s.Apply(ctx, store.Plan{Objects: []store.ObjectChange{{Kind: "", Object: store.Object{ID: "x"}}}}); err == nil {
		t.Error("a plan object without a kind was accepted")
	}
	next := comp("pool-a", "memA-b1", "memA-b2")
	next.Version = 2
	apply(t, s, store.Plan{Put: []*inventory.Composition{next}, Objects: []store.ObjectChange{
		{Kind: "lease", Object: store.Object{ID: "l1"}, Delete: true},
		{Kind: "lease", Object: store.Object{ID: "l2", Data: []byte("two-v2")}},
		{Kind: "lease", Object: store.Object{ID: "l9"}, Delete: true}, // absent: not an error
	}})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir)
	t.Cleanup(func() { s.Close() })
	got, err := s.Objects(ctx, "lease")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].ID != "l2" || string(got[0].Data) != "two-v2" {
		t.Errorf("leases after the plans and a reopen: %+v, want only l2 = two-v2", got)
	}
	expect(t, s, next)
}

// testVersionedObjects: objects written with versions are checked like
// compositions, Plan.Check holds a plan to the versions it was decided on,
// and unversioned puts still count versions.
func testVersionedObjects(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	s := openStore(t, open)
	put := func(id, data string, v int64) store.ObjectChange {
		return store.ObjectChange{Kind: "tenant", Object: store.Object{ID: id, Data: []byte(data), Version: v}}
	}
	apply(t, s, store.Plan{Objects: []store.ObjectChange{put("blue", "q=4", 1)}})
	for _, tc := range []struct {
		name string
		p    store.Plan
	}{
		{"create an existing object", store.Plan{Objects: []store.ObjectChange{put("blue", "q=9", 1)}}},
		{"update from a stale version", store.Plan{Objects: []store.ObjectChange{put("blue", "q=9", 3)}}},
		{"update an absent object", store.Plan{Objects: []store.ObjectChange{put("red", "q=1", 2)}}},
		{"delete at the wrong version", store.Plan{Objects: []store.ObjectChange{{Kind: "tenant", Object: store.Object{ID: "blue", Version: 2}, Delete: true}}}},
		{"check a stale version", store.Plan{Put: []*inventory.Composition{comp("c1", "h1")}, Check: []store.ObjectRef{{Kind: "tenant", ID: "blue", Version: 2}}}},
		{"check that an object is absent", store.Plan{Put: []*inventory.Composition{comp("c1", "h1")}, Check: []store.ObjectRef{{Kind: "tenant", ID: "blue"}}}},
	} {
		if err := s.Apply(ctx, tc.p); !errors.Is(err, store.ErrConflict) {
			t.Errorf("%s: Apply = %v, want ErrConflict", tc.name, err)
		}
	}
	expect(t, s)
	// The right versions apply: a composition checked against the tenant
	// it was decided on, the tenant's next version, a check of absence.
	apply(t, s, store.Plan{Put: []*inventory.Composition{comp("c1", "h1")}, Check: []store.ObjectRef{{Kind: "tenant", ID: "blue", Version: 1}, {Kind: "tenant", ID: "red"}}})
	apply(t, s, store.Plan{Objects: []store.ObjectChange{put("blue", "q=8", 2)}})
	apply(t, s, store.Plan{Objects: []store.ObjectChange{put("blue", "q=16", 0)}}) // unversioned: counts on
	got, err := s.Objects(ctx, "tenant")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Version != 3 || string(got[0].Data) != "q=16" {
		t.Fatalf("tenant after three puts: %+v, want version 3, q=16", got)
	}
	apply(t, s, store.Plan{Objects: []store.ObjectChange{{Kind: "tenant", Object: store.Object{ID: "blue", Version: 3}, Delete: true}}})
	if got, _ := s.Objects(ctx, "tenant"); len(got) != 0 {
		t.Errorf("deleted at its version, still there: %+v", got)
	}
	if err := s.Apply(ctx, store.Plan{Check: []store.ObjectRef{{Kind: "tenant", ID: "x", Version: -1}}}); err == nil || errors.Is(err, store.ErrConflict) {
		t.Errorf("a negative version check = %v, want a plain error", err)
	}
}

// testRecordSets: the way tenancy keeps its records — kinds are separate
// namespaces, a change to several records (an account's deletion with its
// sessions, a tenant joined by an account) commits whole or not at all,
// and versions survive reopening the store.
func testRecordSets(t *testing.T, open OpenFunc) {
	ctx := context.Background()
	dir := t.TempDir()
	s := open(t, dir)
	rec := func(kind, id string, v int64) store.ObjectChange {
		return store.ObjectChange{Kind: kind, Object: store.Object{ID: id, Data: []byte(kind + ":" + id), Version: v}}
	}
	del := func(kind, id string, v int64) store.ObjectChange {
		return store.ObjectChange{Kind: kind, Object: store.Object{ID: id, Version: v}, Delete: true}
	}
	// The same ID under two kinds is two records.
	apply(t, s, store.Plan{Objects: []store.ObjectChange{rec("account", "ann", 1), rec("tenant", "ann", 1),
		rec("session", "s1", 0), rec("session", "s2", 0), rec("tenant", "blue", 1)}})
	// A deletion of ann with her sessions, decided on a stale read of
	// her account: nothing of it applies.
	if err := s.Apply(ctx, store.Plan{Objects: []store.ObjectChange{del("session", "s1", 0), del("session", "s2", 0),
		del("account", "ann", 2)}}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("stale deletion: %v, want ErrConflict", err)
	}
	count := func(s store.Store, kind string) []store.Object {
		t.Helper()
		objs, err := s.Objects(ctx, kind)
		if err != nil {
			t.Fatal(err)
		}
		return objs
	}
	if n := len(count(s, "session")); n != 2 {
		t.Fatalf("a refused plan deleted sessions: %d left, want 2", n)
	}
	// An account joining blue moves blue's version on in the same plan;
	// a deletion of blue decided before it conflicts.
	apply(t, s, store.Plan{Objects: []store.ObjectChange{rec("account", "bob", 1), rec("tenant", "blue", 2)}})
	if err := s.Apply(ctx, store.Plan{Objects: []store.ObjectChange{del("tenant", "blue", 1)}}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("deleting blue on a stale read: %v, want ErrConflict", err)
	}
	apply(t, s, store.Plan{Objects: []store.ObjectChange{del("session", "s1", 0), del("session", "s2", 0), del("account", "ann", 1)}})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir)
	defer s.Close()
	if got := count(s, "account"); len(got) != 1 || got[0].ID != "bob" || got[0].Version != 1 {
		t.Errorf("accounts after reopening: %+v", got)
	}
	tenants := count(s, "tenant")
	if len(tenants) != 2 || tenants[0].ID != "ann" || tenants[1].ID != "blue" || tenants[1].Version != 2 || string(tenants[1].Data) != "tenant:blue" {
		t.Errorf("tenants after reopening: %+v", tenants)
	}
	if got := count(s, "session"); len(got) != 0 {
		t.Errorf("sessions after reopening: %+v", got)
	}
}
