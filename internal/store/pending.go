package store

import (
	"context"
	"sync"
	"time"
)

// PendingAudit carries the audit entry of one API request to the workflow
// that commits the request's outcome, so that the entry is written in the
// same commit as the outcome (Plan.Audit) instead of costing a durable
// commit of its own. The API layer fills in who, where and what
// (NewPendingAudit) and puts it in the context it passes to the workflow
// (WithPendingAudit); the workflow takes the entry for its outcome plan
// (Take), reports whether that plan was committed (Done), and the API layer
// then asks whether the entry is already recorded (Recorded) before
// appending one itself. It is safe for concurrent use.
type PendingAudit struct {
	mu       sync.Mutex
	entry    AuditEntry
	taken    bool
	recorded bool
}

// NewPendingAudit returns a pending entry whose outcome, once a workflow
// takes it, is e.Outcome with status e.Status (the answer the API gives
// when the workflow succeeds).
func NewPendingAudit(e AuditEntry) *PendingAudit {
	return &PendingAudit{entry: e}
}

// Take returns the entry with detail set, for the plan that commits the
// workflow's outcome, and false if another plan already holds it or it was
// recorded. The caller must call Done with the plan's result.
func (p *PendingAudit) Take(detail string) (AuditEntry, bool) {
	if p == nil {
		return AuditEntry{}, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.taken || p.recorded {
		return AuditEntry{}, false
	}
	p.taken = true
	e := p.entry
	e.Detail = detail
	if e.Time.IsZero() {
		e.Time = time.Now().UTC()
	}
	return e, true
}

// Done reports the outcome of the plan that took the entry: recorded when
// err is nil, free to be taken again otherwise.
func (p *PendingAudit) Done(err error) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.taken = false
	if err == nil {
		p.recorded = true
	}
}

// Recorded reports whether a committed plan holds the entry. A nil
// PendingAudit is never recorded.
func (p *PendingAudit) Recorded() bool {
	if p == nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.recorded
}

type pendingKey struct{}

// WithPendingAudit returns a copy of ctx that carries p.
func WithPendingAudit(ctx context.Context, p *PendingAudit) context.Context {
	return context.WithValue(ctx, pendingKey{}, p)
}

// PendingAuditFrom returns the PendingAudit ctx carries, or nil.
func PendingAuditFrom(ctx context.Context) *PendingAudit {
	p, _ := ctx.Value(pendingKey{}).(*PendingAudit)
	return p
}
