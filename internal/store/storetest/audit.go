package storetest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"rackpool/internal/store"
)

// auditEntry returns a fully populated entry at t0 + i seconds.
func auditEntry(i int, user, tenant, outcome string) store.AuditEntry {
	return store.AuditEntry{
		Time:    t0.Add(time.Duration(i)*time.Second + time.Duration(i)), // nanoseconds matter
		User:    user,
		Tenant:  tenant,
		Remote:  fmt.Sprintf("192.0.2.%d:5%04d", i%250, i),
		Method:  "POST",
		Target:  fmt.Sprintf("/redfish/v1/Systems/sys-%d", i),
		Action:  "Compose",
		Outcome: outcome,
		Status:  201,
		Detail:  fmt.Sprintf("entry %d — ünïcode, \"quotes\"\nnewline", i),
		// Kept as given, even an ID no registry has.
		MessageID: fmt.Sprintf("Base.1.22.Created%d", i),
	}
}

func appendAudit(t *testing.T, s store.Store, e store.AuditEntry) store.AuditEntry {
	t.Helper()
	got, err := s.AppendAudit(context.Background(), e)
	if err != nil {
		t.Fatalf("AppendAudit: %v", err)
	}
	return got
}

func audit(t *testing.T, s store.Store, q store.AuditQuery) []store.AuditEntry {
	t.Helper()
	es, err := s.Audit(context.Background(), q)
	if err != nil {
		t.Fatalf("Audit(%+v): %v", q, err)
	}
	return es
}

func auditCount(t *testing.T, s store.Store) int64 {
	t.Helper()
	n, err := s.AuditCount(context.Background())
	if err != nil {
		t.Fatalf("AuditCount: %v", err)
	}
	return n
}

// auditDiff describes how got differs from want, or returns "". Times must
// be the same instant and in UTC.
func auditDiff(got, want store.AuditEntry) string {
	var d []string
	if !got.Time.Equal(want.Time) {
		d = append(d, fmt.Sprintf("Time: got %s, want %s", got.Time.Format(time.RFC3339Nano), want.Time.Format(time.RFC3339Nano)))
	}
	if got.Time.Location() != time.UTC {
		d = append(d, fmt.Sprintf("Time location: got %v, want UTC", got.Time.Location()))
	}
	g, w := got, want
	g.Time, w.Time = time.Time{}, time.Time{}
	if g != w {
		d = append(d, fmt.Sprintf("got %+v, want %+v", g, w))
	}
	if len(d) == 0 {
		return ""
	}
	return fmt.Sprintf("audit entry %d: %v", want.ID, d)
}

// expectAudit fails t unless got is exactly want, in order.
func expectAudit(t *testing.T, got, want []store.AuditEntry) {
	t.Helper()
	ids := func(es []store.AuditEntry) []int64 {
		var out []int64
		for _, e := range es {
			out = append(out, e.ID)
		}
		return out
	}
	if !slices.Equal(ids(got), ids(want)) {
		t.Fatalf("audit IDs %v, want %v", ids(got), ids(want))
	}
	for i := range want {
		if d := auditDiff(got[i], want[i]); d != "" {
			t.Error(d)
		}
	}
}

func testAuditAppend(t *testing.T, open OpenFunc) {
	s := openStore(t, open)
	if n := auditCount(t, s); n != 0 {
		t.Fatalf("new store: AuditCount = %d", n)
	}
	if es := audit(t, s, store.AuditQuery{}); len(es) != 0 {
		t.Fatalf("new store: Audit returned %d entries", len(es))
	}
	// Times out of order, in a non-UTC zone, and an entry with only the
	// required fields: IDs follow the order of appending, times are kept.
	ins := []store.AuditEntry{
		auditEntry(5, "alice", "t1", store.AuditSuccess),
		auditEntry(2, "bob", "", store.AuditDenied),
		{Time: t0.Add(-time.Hour), Outcome: store.AuditFailure},
		auditEntry(9, "alice", "t1", store.AuditFailure),
	}
	var want []store.AuditEntry
	for i, e := range ins {
		got := appendAudit(t, s, e)
		if got.ID <= 0 {
			t.Fatalf("entry %d: ID %d", i, got.ID)
		}
		if len(want) > 0 && got.ID <= want[len(want)-1].ID {
			t.Fatalf("entry %d: ID %d not after %d", i, got.ID, want[len(want)-1].ID)
		}
		e.ID = got.ID
		if d := auditDiff(got, e); d != "" {
			t.Errorf("AppendAudit returned: %s", d)
		}
		want = append(want, e)
	}
	expectAudit(t, audit(t, s, store.AuditQuery{}), want)
	if n := auditCount(t, s); n != int64(len(want)) {
		t.Fatalf("AuditCount = %d, want %d", n, len(want))
	}
	// An ID set by the caller is ignored.
	e := auditEntry(1, "carol", "", store.AuditSuccess)
	e.ID = 1
	if got := appendAudit(t, s, e); got.ID <= want[len(want)-1].ID {
		t.Fatalf("caller's ID kept: got %d", got.ID)
	}
}

func testAuditInvalid(t *testing.T, open OpenFunc) {
	s := openStore(t, open)
	tests := []struct {
		name string
		e    store.AuditEntry
	}{
		{"no time", store.AuditEntry{User: "a", Outcome: store.AuditSuccess}},
		{"no outcome", store.AuditEntry{Time: t0, User: "a"}},
		{"unknown outcome", store.AuditEntry{Time: t0, User: "a", Outcome: "ok"}},
		{"outcome in capitals", store.AuditEntry{Time: t0, User: "a", Outcome: "Success"}},
		{"time too early", store.AuditEntry{Time: time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC), Outcome: store.AuditSuccess}},
		{"time too late", store.AuditEntry{Time: time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC), Outcome: store.AuditSuccess}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := s.AppendAudit(context.Background(), tt.e); !errors.Is(err, store.ErrInvalidAudit) {
				t.Fatalf("AppendAudit = %v, want ErrInvalidAudit", err)
			}
		})
	}
	if n := auditCount(t, s); n != 0 {
		t.Fatalf("invalid entries stored: AuditCount = %d", n)
	}
}

func testAuditFilters(t *testing.T, open OpenFunc) {
	s := openStore(t, open)
	// Entry i is at t0 + i s (+ i ns).
	spec := []struct{ user, tenant, outcome string }{
		0: {"alice", "t1", store.AuditSuccess},
		1: {"bob", "", store.AuditDenied},
		2: {"alice", "t1", store.AuditFailure},
		3: {"carol", "t2", store.AuditSuccess},
		4: {"", "", store.AuditDenied},
		5: {"alice", "t2", store.AuditSuccess},
		6: {"bob", "", store.AuditSuccess},
		7: {"carol", "t2", store.AuditDenied},
	}
	var all []store.AuditEntry
	for i, sp := range spec {
		all = append(all, appendAudit(t, s, auditEntry(i, sp.user, sp.tenant, sp.outcome)))
	}
	at := func(i int) time.Time { return all[i].Time }
	tests := []struct {
		name string
		q    store.AuditQuery
		want []int // indexes into all
	}{
		{"everything", store.AuditQuery{}, []int{0, 1, 2, 3, 4, 5, 6, 7}},
		{"user", store.AuditQuery{User: "alice"}, []int{0, 2, 5}},
		{"tenant", store.AuditQuery{Tenant: "t2"}, []int{3, 5, 7}},
		{"outcome denied", store.AuditQuery{Outcome: store.AuditDenied}, []int{1, 4, 7}},
		{"outcome failure", store.AuditQuery{Outcome: store.AuditFailure}, []int{2}},
		{"user and outcome", store.AuditQuery{User: "bob", Outcome: store.AuditSuccess}, []int{6}},
		{"user and tenant", store.AuditQuery{User: "alice", Tenant: "t2"}, []int{5}},
		{"no match", store.AuditQuery{User: "mallory"}, nil},
		{"since is inclusive", store.AuditQuery{Since: at(5)}, []int{5, 6, 7}},
		{"since one nanosecond later", store.AuditQuery{Since: at(5).Add(1)}, []int{6, 7}},
		{"until is exclusive", store.AuditQuery{Until: at(2)}, []int{0, 1}},
		{"until one nanosecond later", store.AuditQuery{Until: at(2).Add(1)}, []int{0, 1, 2}},
		{"window", store.AuditQuery{Since: at(2), Until: at(6)}, []int{2, 3, 4, 5}},
		{"window in another zone", store.AuditQuery{Since: at(2).In(time.FixedZone("Y", -7*3600)), Until: at(6).In(time.FixedZone("Z", 3600))}, []int{2, 3, 4, 5}},
		{"empty window", store.AuditQuery{Since: at(6), Until: at(6)}, nil},
		{"after ID", store.AuditQuery{AfterID: all[4].ID}, []int{5, 6, 7}},
		{"after the last ID", store.AuditQuery{AfterID: all[7].ID}, nil},
		{"after ID with filters", store.AuditQuery{AfterID: all[1].ID, User: "alice", Since: at(1)}, []int{2, 5}},
		{"limit", store.AuditQuery{Limit: 3}, []int{0, 1, 2}},
		{"limit after filters", store.AuditQuery{Outcome: store.AuditSuccess, Limit: 2}, []int{0, 3}},
		{"limit with after ID", store.AuditQuery{AfterID: all[2].ID, Limit: 2}, []int{3, 4}},
		{"far bounds", store.AuditQuery{Since: time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), Until: time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)}, []int{0, 1, 2, 3, 4, 5, 6, 7}},
		{"offset", store.AuditQuery{Offset: 5}, []int{5, 6, 7}},
		{"offset and limit after filters", store.AuditQuery{Outcome: store.AuditSuccess, Offset: 1, Limit: 2}, []int{3, 5}},
		{"offset past the end", store.AuditQuery{Offset: 8}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var want []store.AuditEntry
			for _, i := range tt.want {
				want = append(want, all[i])
			}
			expectAudit(t, audit(t, s, tt.q), want)
			// AuditMatching counts what the query selects, limit and
			// offset aside.
			whole := tt.q
			whole.Limit, whole.Offset = 0, 0
			n, err := s.AuditMatching(context.Background(), whole)
			if err != nil {
				t.Fatalf("AuditMatching: %v", err)
			}
			if want := len(audit(t, s, whole)); n != int64(want) {
				t.Fatalf("AuditMatching = %d, want %d", n, want)
			}
		})
	}

	t.Run("paging", func(t *testing.T) {
		var got []store.AuditEntry
		q := store.AuditQuery{Limit: 3}
		for pages := 0; ; pages++ {
			if pages > len(all) {
				t.Fatal("paging does not end")
			}
			page := audit(t, s, q)
			if len(page) == 0 {
				break
			}
			if len(page) > 3 {
				t.Fatalf("page of %d entries, limit 3", len(page))
			}
			got = append(got, page...)
			q.AfterID = page[len(page)-1].ID
		}
		expectAudit(t, got, all)
	})
}

// testAuditConcurrent appends from many goroutines at once: every entry
// gets its own ID, and a query without a limit returns DefaultAuditLimit
// entries.
func testAuditConcurrent(t *testing.T, open OpenFunc) {
	s := openStore(t, open)
	const (
		workers = 16
		each    = 70
		total   = workers * each
	)
	if total <= store.DefaultAuditLimit {
		t.Fatal("test needs more entries than the default limit")
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		byID = map[int64]store.AuditEntry{}
		errs = make(chan error, workers)
	)
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				e := auditEntry(w*each+i, fmt.Sprintf("user-%d", w), "", store.AuditSuccess)
				got, err := s.AppendAudit(context.Background(), e)
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				if _, dup := byID[got.ID]; dup {
					errs <- fmt.Errorf("ID %d assigned twice", got.ID)
				}
				byID[got.ID] = got
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := auditCount(t, s); n != total {
		t.Fatalf("AuditCount = %d, want %d", n, total)
	}
	var want []store.AuditEntry
	for _, e := range byID {
		want = append(want, e)
	}
	slices.SortFunc(want, func(a, b store.AuditEntry) int { return cmp.Compare(a.ID, b.ID) })
	if got := audit(t, s, store.AuditQuery{}); len(got) != store.DefaultAuditLimit {
		t.Fatalf("Audit without a limit returned %d entries, want %d", len(got), store.DefaultAuditLimit)
	} else {
		expectAudit(t, got, want[:store.DefaultAuditLimit])
	}
	expectAudit(t, audit(t, s, store.AuditQuery{Limit: store.MaxAuditLimit * 10}), want)
	// Each worker's entries come back in the order it appended them.
	for w := range workers {
		got := audit(t, s, store.AuditQuery{User: fmt.Sprintf("user-%d", w)})
		if len(got) != each {
			t.Fatalf("user-%d: %d entries, want %d", w, len(got), each)
		}
		for i, e := range got {
			if want := auditEntry(w*each+i, "", "", "").Target; e.Target != want {
				t.Fatalf("user-%d entry %d: target %s, want %s", w, i, e.Target, want)
			}
		}
	}
}

func testAuditPersistence(t *testing.T, open OpenFunc) {
	dir := t.TempDir()
	s := open(t, dir)
	var want []store.AuditEntry
	for i := range 5 {
		want = append(want, appendAudit(t, s, auditEntry(i, "alice", "t1", store.AuditSuccess)))
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	s = open(t, dir)
	t.Cleanup(func() { s.Close() })
	expectAudit(t, audit(t, s, store.AuditQuery{}), want)
	if n := auditCount(t, s); n != 5 {
		t.Fatalf("AuditCount after reopen = %d, want 5", n)
	}
	// IDs keep increasing across a reopen.
	next := appendAudit(t, s, auditEntry(9, "bob", "", store.AuditDenied))
	if next.ID <= want[len(want)-1].ID {
		t.Fatalf("ID after reopen %d, not after %d", next.ID, want[len(want)-1].ID)
	}
}
