package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// AuditEntry is one record of the audit log: who did what to which
// resource, from where, and how it ended.
//
// The log is for accountability, so it must never hold secrets: callers
// must not put request bodies, passwords, tokens, session keys or password
// hashes in any field, Detail included. Detail is a short human-readable
// note ("composed sys-3 from 4 blocks", "bad password").
type AuditEntry struct {
	// ID is assigned by AppendAudit: every entry's ID is greater than
	// that of every entry appended before it.
	ID int64
	// Time is when the audited action happened, set by the caller. Stores
	// keep it to the nanosecond and return it in UTC.
	Time time.Time
	// User is the account name ("" for an anonymous request).
	User string
	// Tenant is the account's tenant ("" for an unscoped account).
	Tenant string
	// Remote is the client's address.
	Remote string
	// Method and Target are the request's HTTP method and path.
	Method string
	Target string
	// Action names what was attempted, e.g. "Compose", "Login".
	Action string
	// Outcome is AuditSuccess, AuditFailure or AuditDenied.
	Outcome string
	// Status is the HTTP status code of the response.
	Status int
	// Detail is a short note without secrets (see above).
	Detail string
	// MessageID names the outcome in a Redfish message registry, as the
	// client's answer did ("Base.1.22.Created", "Base.1.22.ResourceInUse",
	// "Rackpool.1.0.PortBusy"); "" for entries written before it was kept.
	MessageID string
}

// AuditMessage is the Base registry MessageId for an entry of outcome and
// HTTP status written without one: by the service itself (provisioning,
// elastic disaggregation), or before entries kept it.
func AuditMessage(outcome string, status int) string {
	const base = "Base.1.22."
	switch {
	case outcome == AuditDenied && status == 401:
		return base + "NoValidSession"
	case outcome == AuditDenied && status == 404:
		return base + "ResourceNotFound"
	case outcome == AuditDenied:
		return base + "InsufficientPrivilege"
	case outcome == AuditFailure:
		return base + "GeneralError"
	case status == 201:
		return base + "Created"
	}
	return base + "Success"
}

// Audit outcomes.
const (
	AuditSuccess = "success" // the action was done
	AuditFailure = "failure" // the action was allowed but failed
	AuditDenied  = "denied"  // authentication or authorisation refused it
)

// Audit query limits.
const (
	// DefaultAuditLimit is how many entries Audit returns when the query
	// sets no Limit.
	DefaultAuditLimit = 1000
	// MaxAuditLimit is the most entries one Audit call returns.
	MaxAuditLimit = 10000
)

// AuditQuery selects audit entries. Zero fields select everything.
type AuditQuery struct {
	// AfterID selects entries with a greater ID: pass the last ID of one
	// page to get the next.
	AfterID int64
	// Limit is the most entries to return: 0 (or less) means
	// DefaultAuditLimit; more than MaxAuditLimit means MaxAuditLimit.
	Limit int
	// User, Tenant and Outcome select entries with exactly that value; ""
	// selects any.
	User, Tenant, Outcome string
	// Since selects entries at or after it, Until entries strictly before
	// it; a zero time does not bound.
	Since, Until time.Time
	// Offset skips that many of the entries selected (ordered by ID)
	// before the first returned.
	Offset int
}

// EffectiveLimit is the number of entries q may return, as Limit
// documents.
func (q AuditQuery) EffectiveLimit() int {
	switch {
	case q.Limit <= 0:
		return DefaultAuditLimit
	case q.Limit > MaxAuditLimit:
		return MaxAuditLimit
	}
	return q.Limit
}

// Audit times must fit in int64 nanoseconds since the Unix epoch, which is
// how stores keep them.
var (
	minAuditTime = time.Unix(0, -1<<63).UTC()
	maxAuditTime = time.Unix(0, 1<<63-1).UTC()
)

// ErrInvalidAudit: an audit entry was rejected because a field is missing
// or out of range.
var ErrInvalidAudit = errors.New("store: invalid audit entry")

// Validate checks what every store requires of an entry it appends: a
// time in the years 1678 to 2261 and one of the three outcomes. The error
// wraps ErrInvalidAudit.
func (e AuditEntry) Validate() error {
	switch {
	case e.Time.IsZero():
		return fmt.Errorf("%w: no time", ErrInvalidAudit)
	case e.Time.Before(minAuditTime) || e.Time.After(maxAuditTime):
		return fmt.Errorf("%w: time %s out of range", ErrInvalidAudit, e.Time.Format(time.RFC3339))
	}
	switch e.Outcome {
	case AuditSuccess, AuditFailure, AuditDenied:
	default:
		return fmt.Errorf("%w: outcome %q is not %q, %q or %q", ErrInvalidAudit, e.Outcome, AuditSuccess, AuditFailure, AuditDenied)
	}
	return nil
}

// AuditColumns are the audit table's columns in the order both SQL
// backends select and insert them (id first).
const AuditColumns = `id, time, username, tenant, remote, method, target, action, outcome, status, detail, message_id`

// Placeholders for the SQL backends' statements: placeholder(n) writes the
// n-th parameter (1 first).
func QuestionMark(int) string { return "?" }                   // SQLite
func DollarN(n int) string    { return "$" + strconv.Itoa(n) } // PostgreSQL

// AuditInsert is the statement that inserts an audit entry into the SQL
// backends' audit table, its ID assigned by the database and its
// parameters (written by placeholder) the values InsertArgs returns.
func AuditInsert(placeholder func(n int) string) string {
	marks := make([]string, auditInsertColumns)
	for i := range marks {
		marks[i] = placeholder(i + 1)
	}
	return `INSERT INTO audit (` + AuditColumns[len("id, "):] + `) VALUES (` + strings.Join(marks, ", ") + `)`
}

// auditInsertColumns is how many columns AuditInsert sets: all but id.
const auditInsertColumns = 11

// InsertArgs are e's values for AuditInsert, its time in Unix nanoseconds.
func (e AuditEntry) InsertArgs() []any {
	return []any{e.Time.UnixNano(), e.User, e.Tenant, e.Remote, e.Method, e.Target, e.Action, e.Outcome, e.Status, e.Detail, e.MessageID}
}

// Select returns the statement that selects the entries q asks for from
// the SQL backends' audit table (AuditColumns, time in Unix nanoseconds),
// ordered by ID and at most q.EffectiveLimit() of them, and its arguments.
// placeholder(n) writes the n-th parameter.
func (q AuditQuery) Select(placeholder func(n int) string) (string, []any) {
	query := `SELECT ` + AuditColumns + ` FROM audit`
	where, args := q.where(placeholder)
	if where != "" {
		query += " WHERE " + where
	}
	args = append(args, q.EffectiveLimit())
	query += " ORDER BY id LIMIT " + placeholder(len(args))
	if q.Offset > 0 {
		args = append(args, q.Offset)
		query += " OFFSET " + placeholder(len(args))
	}
	return query, args
}

// where returns the SQL conditions q selects, joined by AND ("" for none),
// and their arguments.
func (q AuditQuery) where(placeholder func(n int) string) (string, []any) {
	var (
		where []string
		args  []any
	)
	add := func(cond string, arg any) {
		args = append(args, arg)
		where = append(where, cond+" "+placeholder(len(args)))
	}
	if q.AfterID > 0 {
		add("id >", q.AfterID)
	}
	if q.User != "" {
		add("username =", q.User)
	}
	if q.Tenant != "" {
		add("tenant =", q.Tenant)
	}
	if q.Outcome != "" {
		add("outcome =", q.Outcome)
	}
	if !q.Since.IsZero() {
		add("time >=", ClampNano(q.Since))
	}
	if !q.Until.IsZero() {
		add("time <", ClampNano(q.Until))
	}
	return strings.Join(where, " AND "), args
}

// ClampNano is t in nanoseconds since the epoch, saturating instead of
// overflowing for times outside what int64 nanoseconds can hold.
func ClampNano(t time.Time) int64 {
	switch {
	case t.Before(time.Unix(0, -1<<63)):
		return -1 << 63
	case t.After(time.Unix(0, 1<<63-1)):
		return 1<<63 - 1
	}
	return t.UnixNano()
}

// Rows is the part of a result set both SQL backends' drivers offer
// (database/sql and pgx).
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// ScanAudit reads every row of a query that selects AuditColumns, times in
// Unix nanoseconds.
func ScanAudit(rows Rows) ([]AuditEntry, error) {
	var out []AuditEntry
	for rows.Next() {
		var (
			e  AuditEntry
			ns int64
		)
		if err := rows.Scan(&e.ID, &ns, &e.User, &e.Tenant, &e.Remote, &e.Method,
			&e.Target, &e.Action, &e.Outcome, &e.Status, &e.Detail, &e.MessageID); err != nil {
			return nil, err
		}
		e.Time = time.Unix(0, ns).UTC()
		out = append(out, e)
	}
	return out, rows.Err()
}

// ClosingRows is a result set its reader closes (pgx's rows are; a
// backend on database/sql wraps its *sql.Rows).
type ClosingRows interface {
	Rows
	Close()
}

// AuditReader is the audit log's read side as both SQL backends have it:
// the statements and the scanning, over the backend's query function. A
// backend embeds one (NewAuditReader) for its Audit and AuditCount.
type AuditReader struct {
	closed      func() bool
	placeholder func(n int) string
	query       func(ctx context.Context, sql string, args ...any) (ClosingRows, error)
	readErr     func(what string, err error) error
}

// NewAuditReader returns the audit reader of a backend: closed reports
// whether the store is closed (reads then fail with ErrClosed),
// placeholder writes the n-th statement parameter (QuestionMark,
// DollarN), query runs a statement on the backend's read connections and
// readErr words a failed read, what saying which ("read audit log").
func NewAuditReader(closed func() bool, placeholder func(n int) string,
	query func(ctx context.Context, sql string, args ...any) (ClosingRows, error),
	readErr func(what string, err error) error) AuditReader {
	return AuditReader{closed: closed, placeholder: placeholder, query: query, readErr: readErr}
}

// Audit returns the entries q selects, ordered by ID (Store.Audit). A
// time bound uses the audit table's index on time; AfterID paging uses
// the primary key.
func (a AuditReader) Audit(ctx context.Context, q AuditQuery) ([]AuditEntry, error) {
	query, args := q.Select(a.placeholder)
	return Read(a.closed(), "read audit log", a.readErr, func() (ClosingRows, error) { return a.query(ctx, query, args...) }, ScanAudit)
}

// Read is how both SQL backends read rows: it refuses when the store is
// closed, runs query, scans its rows with scan and closes them. A failure
// is worded by readErr, what saying which read failed ("read
// compositions").
func Read[T any](closed bool, what string, readErr func(what string, err error) error,
	query func() (ClosingRows, error), scan func(Rows) (T, error)) (T, error) {
	var none T
	if closed {
		return none, ErrClosed
	}
	rows, err := query()
	if err != nil {
		return none, readErr(what, err)
	}
	defer rows.Close()
	out, err := scan(rows)
	if err != nil {
		return none, readErr(what, err)
	}
	return out, nil
}

// AuditCount returns how many entries the audit table holds
// (Store.AuditCount).
func (a AuditReader) AuditCount(ctx context.Context) (int64, error) {
	return a.AuditMatching(ctx, AuditQuery{})
}

// AuditMatching returns how many entries q selects, its Limit and Offset
// aside (Store.AuditMatching).
func (a AuditReader) AuditMatching(ctx context.Context, q AuditQuery) (int64, error) {
	if a.closed() {
		return 0, ErrClosed
	}
	query := `SELECT COUNT(*) FROM audit`
	where, args := q.where(a.placeholder)
	if where != "" {
		query += " WHERE " + where
	}
	rows, err := a.query(ctx, query, args...)
	if err != nil {
		return 0, a.readErr("count audit log", err)
	}
	defer rows.Close()
	var n int64
	if !rows.Next() {
		err = rows.Err()
		if err == nil {
			err = errors.New("no row")
		}
	} else {
		err = rows.Scan(&n)
	}
	if err != nil {
		return 0, a.readErr("count audit log", err)
	}
	return n, nil
}

// ForAppend is e as a backend appends it: validated (an error wrapping
// ErrInvalidAudit otherwise), its ID cleared and its time in UTC.
func (e AuditEntry) ForAppend() (AuditEntry, error) {
	if err := e.Validate(); err != nil {
		return AuditEntry{}, err
	}
	e.ID, e.Time = 0, e.Time.UTC()
	return e, nil
}

// AppendAudit is what both backends' Store.AppendAudit do around their
// own insert: refuse when ctx has ended or the store is closed, validate e
// (an error wrapping ErrInvalidAudit), clear its ID and put its time in
// UTC, then insert it durably and return it with the ID insert assigned.
func AppendAudit(ctx context.Context, closed bool, e AuditEntry, insert func(AuditEntry) (int64, error)) (AuditEntry, error) {
	if err := Admit(ctx, closed); err != nil {
		return AuditEntry{}, err
	}
	e, err := e.ForAppend()
	if err != nil {
		return AuditEntry{}, err
	}
	id, err := insert(e)
	if err != nil {
		return AuditEntry{}, err
	}
	e.ID = id
	return e, nil
}
