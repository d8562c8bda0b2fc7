package store

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"
)

func TestAuditQueryEffectiveLimit(t *testing.T) {
	tests := []struct {
		limit, want int
	}{
		{0, DefaultAuditLimit},
		{-5, DefaultAuditLimit},
		{1, 1},
		{MaxAuditLimit, MaxAuditLimit},
		{MaxAuditLimit + 1, MaxAuditLimit},
	}
	for _, tt := range tests {
		if got := (AuditQuery{Limit: tt.limit}).EffectiveLimit(); got != tt.want {
			t.Errorf("Limit %d: EffectiveLimit = %d, want %d", tt.limit, got, tt.want)
		}
	}
}

func TestAuditEntryValidate(t *testing.T) {
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		e    AuditEntry
		ok   bool
	}{
		{"success", AuditEntry{Time: now, Outcome: AuditSuccess}, true},
		{"failure", AuditEntry{Time: now, Outcome: AuditFailure}, true},
		{"denied", AuditEntry{Time: now, Outcome: AuditDenied}, true},
		{"earliest year", AuditEntry{Time: time.Date(1678, 1, 1, 0, 0, 0, 0, time.UTC), Outcome: AuditSuccess}, true},
		{"latest year", AuditEntry{Time: time.Date(2261, 12, 31, 0, 0, 0, 0, time.UTC), Outcome: AuditSuccess}, true},
		{"zero time", AuditEntry{Outcome: AuditSuccess}, false},
		{"before 1678", AuditEntry{Time: time.Date(1677, 1, 1, 0, 0, 0, 0, time.UTC), Outcome: AuditSuccess}, false},
		{"after 2262", AuditEntry{Time: time.Date(2263, 1, 1, 0, 0, 0, 0, time.UTC), Outcome: AuditSuccess}, false},
		{"no outcome", AuditEntry{Time: now}, false},
		{"other outcome", AuditEntry{Time: now, Outcome: "error"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.e.Validate()
			if tt.ok != (err == nil) {
				t.Fatalf("Validate = %v, want ok %v", err, tt.ok)
			}
			if err != nil && !errors.Is(err, ErrInvalidAudit) {
				t.Fatalf("Validate = %v, not ErrInvalidAudit", err)
			}
		})
	}
}

func TestAuditSQL(t *testing.T) {
	since := time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name        string
		q           AuditQuery
		placeholder func(int) string
		sql         string
		args        []any
	}{
		{"all, SQLite", AuditQuery{}, QuestionMark,
			"SELECT " + AuditColumns + " FROM audit ORDER BY id LIMIT ?", []any{DefaultAuditLimit}},
		{"every bound, PostgreSQL", AuditQuery{AfterID: 7, Limit: 5, User: "alice", Tenant: "t1", Outcome: AuditDenied,
			Since: since, Until: time.Unix(0, 1<<63-1).Add(time.Hour)}, DollarN,
			"SELECT " + AuditColumns + " FROM audit WHERE id > $1 AND username = $2 AND tenant = $3 AND outcome = $4" +
				" AND time >= $5 AND time < $6 ORDER BY id LIMIT $7",
			[]any{int64(7), "alice", "t1", AuditDenied, since.UnixNano(), int64(1<<63 - 1), 5}},
		{"one bound, SQLite", AuditQuery{Tenant: "t2", Limit: MaxAuditLimit + 1}, QuestionMark,
			"SELECT " + AuditColumns + " FROM audit WHERE tenant = ? ORDER BY id LIMIT ?", []any{"t2", MaxAuditLimit}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sql, args := tc.q.Select(tc.placeholder)
			if sql != tc.sql || !reflect.DeepEqual(args, tc.args) {
				t.Errorf("Select = %q %v\nwant     %q %v", sql, args, tc.sql, tc.args)
			}
		})
	}
	const wantInsert = "INSERT INTO audit (time, username, tenant, remote, method, target, action, outcome, status, detail, message_id)" +
		" VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)"
	if got := AuditInsert(DollarN); got != wantInsert {
		t.Errorf("AuditInsert = %q, want %q", got, wantInsert)
	}
	e := AuditEntry{Time: since, User: "u", Tenant: "t", Remote: "r", Method: "POST", Target: "/x", Action: "a",
		Outcome: AuditSuccess, Status: 201, Detail: "d", MessageID: "Base.1.22.Created"}
	if got := e.InsertArgs(); !reflect.DeepEqual(got, []any{since.UnixNano(), "u", "t", "r", "POST", "/x", "a", AuditSuccess, 201, "d", "Base.1.22.Created"}) {
		t.Errorf("InsertArgs = %v", got)
	}
}

func TestAppendAudit(t *testing.T) {
	ctx := context.Background()
	e := AuditEntry{ID: 99, Time: time.Date(2025, 6, 1, 14, 0, 0, 0, time.FixedZone("X", 7200)), Outcome: AuditSuccess}
	var inserted []AuditEntry
	insert := func(e AuditEntry) (int64, error) { inserted = append(inserted, e); return 42, nil }
	got, err := AppendAudit(ctx, false, e, insert)
	if err != nil || got.ID != 42 || got.Time.Location() != time.UTC || !got.Time.Equal(e.Time) {
		t.Fatalf("AppendAudit = %+v, %v", got, err)
	}
	if len(inserted) != 1 || inserted[0].ID != 0 || inserted[0].Time.Location() != time.UTC {
		t.Fatalf("inserted %+v, want the entry without ID, in UTC", inserted)
	}
	failed := errors.New("disk full")
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	for _, tc := range []struct {
		name   string
		ctx    context.Context
		closed bool
		e      AuditEntry
		insert func(AuditEntry) (int64, error)
		want   error
	}{
		{"closed", ctx, true, e, insert, ErrClosed},
		{"cancelled", cancelled, false, e, insert, context.Canceled},
		{"invalid", ctx, false, AuditEntry{Time: e.Time}, insert, ErrInvalidAudit},
		{"insert fails", ctx, false, e, func(AuditEntry) (int64, error) { return 0, failed }, failed},
	} {
		inserted = nil
		if got, err := AppendAudit(tc.ctx, tc.closed, tc.e, tc.insert); !errors.Is(err, tc.want) || got != (AuditEntry{}) {
			t.Errorf("%s: %+v, %v; want %v", tc.name, got, err, tc.want)
		}
		if tc.name != "insert fails" && len(inserted) != 0 {
			t.Errorf("%s: inserted %+v", tc.name, inserted)
		}
	}
}

// fakeRows are rows of int64 columns, closed or not.
type fakeRows struct {
	rows   [][]int64
	err    error
	closed bool
}

func (r *fakeRows) Next() bool { return len(r.rows) > 0 }
func (r *fakeRows) Scan(dest ...any) error {
	row := r.rows[0]
	r.rows = r.rows[1:]
	for i, d := range dest {
		*d.(*int64) = row[i]
	}
	return nil
}
func (r *fakeRows) Err() error { return r.err }
func (r *fakeRows) Close()     { r.closed = true }

func TestAuditReaderCount(t *testing.T) {
	ctx := context.Background()
	var (
		rows   *fakeRows
		closed bool
		asked  string
	)
	failed := errors.New("connection reset")
	a := NewAuditReader(func() bool { return closed }, QuestionMark,
		func(_ context.Context, sql string, _ ...any) (ClosingRows, error) {
			asked = sql
			if rows == nil {
				return nil, failed
			}
			return rows, nil
		},
		func(what string, err error) error { return fmt.Errorf("%s: %w", what, err) })
	rows = &fakeRows{rows: [][]int64{{7}}}
	if n, err := a.AuditCount(ctx); n != 7 || err != nil || asked != "SELECT COUNT(*) FROM audit" || !rows.closed {
		t.Errorf("AuditCount = %d, %v (asked %q, closed %v)", n, err, asked, rows.closed)
	}
	rows = &fakeRows{err: failed}
	if _, err := a.AuditCount(ctx); !errors.Is(err, failed) || err.Error() != "count audit log: connection reset" || !rows.closed {
		t.Errorf("AuditCount of failed rows = %v, closed %v", err, rows.closed)
	}
	rows = nil
	if _, err := a.AuditCount(ctx); !errors.Is(err, failed) {
		t.Errorf("AuditCount of a failed query = %v", err)
	}
	if _, err := a.Audit(ctx, AuditQuery{}); !errors.Is(err, failed) || err.Error() != "read audit log: connection reset" {
		t.Errorf("Audit of a failed query = %v", err)
	}
	closed = true
	if _, err := a.AuditCount(ctx); err != ErrClosed {
		t.Errorf("AuditCount of a closed store = %v", err)
	}
	if _, err := a.Audit(ctx, AuditQuery{}); err != ErrClosed {
		t.Errorf("Audit of a closed store = %v", err)
	}
}

func TestRead(t *testing.T) {
	word := func(what string, err error) error { return fmt.Errorf("%s: %w", what, err) }
	bad := errors.New("bad row")
	sum := func(r Rows) (int64, error) {
		var total int64
		for r.Next() {
			var n int64
			if err := r.Scan(&n); err != nil {
				return 0, err
			}
			total += n
		}
		return total, r.Err()
	}
	rows := &fakeRows{rows: [][]int64{{2}, {3}}}
	if n, err := Read(false, "read sums", word, func() (ClosingRows, error) { return rows, nil }, sum); n != 5 || err != nil || !rows.closed {
		t.Errorf("Read = %d, %v, closed %v", n, err, rows.closed)
	}
	rows = &fakeRows{err: bad}
	if _, err := Read(false, "read sums", word, func() (ClosingRows, error) { return rows, nil }, sum); err == nil ||
		err.Error() != "read sums: bad row" || !rows.closed {
		t.Errorf("Read of failing rows = %v, closed %v", err, rows.closed)
	}
	if _, err := Read(true, "read sums", word, func() (ClosingRows, error) { t.Error("queried a closed store"); return nil, nil }, sum); err != ErrClosed {
		t.Errorf("Read of a closed store = %v", err)
	}
}
