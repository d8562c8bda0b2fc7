// Package store persists the control plane's state: compositions, the
// blocks each one holds, a few settings (such as the administrator's
// password hash) and the audit log. Store is the interface; sqlite/ is the
// embedded default backend and storetest/ is the conformance suite any
// backend must pass.
//
// Writes are plans applied atomically with optimistic version checks
// (DESIGN rule 2): every composition carries a version; a plan that expects a
// version the store no longer holds fails with ErrConflict and changes
// nothing, and so does a plan that would put a block in more compositions
// than its limit allows.
//
// The audit log (audit.go) is append-only: entries get increasing IDs and
// are read back in ID order, filtered and paged by AuditQuery.
package store

import (
	"context"
	"errors"

	"rackpool/internal/inventory"
)

// Store is the control plane's durable state.
type Store interface {
	// Compositions returns every stored composition, in any state, ordered
	// by ID.
	Compositions(ctx context.Context) ([]*inventory.Composition, error)
	// Apply commits p atomically and durably: when it returns nil the plan
	// survives a crash; when it returns an error nothing of it was applied.
	Apply(ctx context.Context, p Plan) error
	// Setting returns the value stored under key, and false if none is.
	Setting(ctx context.Context, key string) (string, bool, error)
	// PutSetting stores value under key, replacing any previous value.
	PutSetting(ctx context.Context, key, value string) error
	// AppendAudit adds e to the audit log, as durably as Apply: when it
	// returns nil the entry survives a crash. It returns e with its ID
	// assigned (greater than every earlier entry's) and Time kept as given
	// (in UTC). An entry that fails e.Validate is refused with an error
	// wrapping ErrInvalidAudit. Callers must not put secrets in any field
	// (see AuditEntry).
	AppendAudit(ctx context.Context, e AuditEntry) (AuditEntry, error)
	// Audit returns the entries q selects, ordered by ID, at most
	// q.EffectiveLimit() of them.
	Audit(ctx context.Context, q AuditQuery) ([]AuditEntry, error)
	// AuditCount returns how many entries the audit log holds.
	AuditCount(ctx context.Context) (int64, error)
	// AuditMatching returns how many entries q selects, its Limit and
	// Offset aside.
	AuditMatching(ctx context.Context, q AuditQuery) (int64, error)
	// Objects returns every object of kind, ordered by ID.
	Objects(ctx context.Context, kind string) ([]Object, error)
	// PutObject stores o under kind, replacing any object with its ID, as
	// durably as Apply.
	PutObject(ctx context.Context, kind string, o Object) error
	// DeleteObject removes the object of kind with id, as durably as
	// Apply. Deleting an absent object is not an error.
	DeleteObject(ctx context.Context, kind, id string) error
	// Close releases the store.
	Close() error
}

// Plan is a set of changes applied all together or not at all.
type Plan struct {
	// Put inserts or replaces compositions. A composition with Version 1
	// must not exist yet; one with Version n > 1 must be stored with
	// version n-1. The blocks it holds are c.Blocks plus c.Adding.
	Put []*inventory.Composition
	// Delete removes compositions, each stored with exactly Version.
	Delete []Deletion
	// Limits gives the most compositions each block may be in; a block not
	// listed may be in one.
	Limits map[string]int
	// Audit entries are appended in the same commit as the plan's changes:
	// both are kept or neither is. Their IDs are assigned as AppendAudit
	// assigns them; an entry that fails Validate fails the plan with an
	// error wrapping ErrInvalidAudit.
	Audit []AuditEntry
	// Objects are put or deleted in the same commit as the plan's other
	// changes (the records a holder of blocks keeps beside its composition
	// record, such as memory leases).
	Objects []ObjectChange
	// Check lists objects that must be stored at exactly the given
	// versions for the plan to apply (0: absent), or it fails with
	// ErrConflict: what a change was decided on (a tenant's quota for a
	// composition it allows) has not changed since it was read.
	Check []ObjectRef
	// Intent marks a plan whose loss in a power failure or operating-system
	// crash the caller can repair: a record written before a workflow
	// touches the fabric, which start-up reconciles against what the
	// fabrics report. The store may acknowledge an intent before it is on
	// stable storage, but it must survive the process's crash (kill -9)
	// and it must be durable no later than the next plan that is not an
	// intent: commits become durable in the order they were acknowledged.
	// Every other plan is durable when Apply returns.
	Intent bool
}

// Object is a durable record of the data plane's bookkeeping (memory
// nodes, memory leases): an ID and data the owner encodes, grouped by kind.
// Objects have no versions; their owner serialises its own updates, and
// writes one in the same plan as the holder record it goes with
// (Plan.Objects) when the two must be kept or lost together.
type Object struct {
	ID   string
	Data []byte
	// Version counts the object's changes: 1 when first put, one more
	// on every put. In an ObjectChange it is the version the change makes
	// (see ObjectChange); 0 there means unversioned.
	Version int64
}

// ObjectRef names an object at a version (0: absent), for Plan.Check.
type ObjectRef struct {
	Kind, ID string
	Version  int64
}

// ObjectChange puts Object under Kind or, with Delete, removes the object
// of Kind with Object.ID. With Object.Version 0 it is unversioned: a put
// replaces whatever is stored (its version counts on), a delete of an
// absent object is not an error. Otherwise it is checked like a
// composition: a put at Version 1 must find no object, a put at Version n
// must find version n-1, a delete at Version n must find version n; a
// mismatch fails the whole plan with ErrConflict.
type ObjectChange struct {
	Kind   string
	Object Object
	Delete bool
}

// Deletion names a composition to delete at an expected version.
type Deletion struct {
	ID      string
	Version int64
}

// Errors.
var (
	// ErrConflict: a version check or a block limit failed; re-read and retry.
	ErrConflict = errors.New("store: conflicting update")
	// ErrClosed: the store has been closed.
	ErrClosed = errors.New("store: closed")
	// ErrUnavailable: the store's database cannot be reached, or this
	// process may no longer write to it (another replica leads); nothing
	// was changed. Retry, here or at another replica.
	ErrUnavailable = errors.New("store: unavailable")
)
