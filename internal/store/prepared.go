package store

import (
	"context"
	"errors"
	"fmt"
)

// PutOp is one composition of a prepared plan, encoded.
type PutOp struct {
	ID      string
	Version int64
	State   string
	Host    string
	Data    []byte   // EncodeComposition
	Blocks  []string // Blocks ∪ Adding, without duplicates, in order
}

// PreparedPlan is a Plan checked and encoded on the caller's goroutine, so
// that a backend's commit only runs statements. Backends apply it in the
// order its fields are listed: deletions, puts, block limits, checks,
// objects, audit entries.
type PreparedPlan struct {
	Puts    []PutOp
	Deletes []Deletion
	Limits  map[string]int
	Audit   []AuditEntry // IDs cleared, times in UTC
	Objects []ObjectChange
	Checks  []ObjectRef
	Intent  bool
}

// Prepare validates p and encodes its compositions. It copies what the
// caller may reuse (object data), so the caller may change p afterwards.
func Prepare(p Plan) (*PreparedPlan, error) {
	pp := &PreparedPlan{Deletes: p.Delete, Limits: p.Limits, Checks: p.Check, Intent: p.Intent}
	for _, c := range p.Check {
		if c.Kind == "" || c.ID == "" || c.Version < 0 {
			return nil, errors.New("plan check: kind, ID and a version >= 0 are required")
		}
	}
	for _, o := range p.Objects {
		if o.Kind == "" || o.Object.ID == "" || o.Object.Version < 0 {
			return nil, errors.New("plan object: kind, ID and a version >= 0 are required")
		}
		o.Object.Data = append([]byte{}, o.Object.Data...) // the caller may reuse its buffer
		pp.Objects = append(pp.Objects, o)
	}
	for _, e := range p.Audit {
		e, err := e.ForAppend()
		if err != nil {
			return nil, err
		}
		pp.Audit = append(pp.Audit, e)
	}
	for _, d := range p.Delete {
		if d.ID == "" {
			return nil, errors.New("delete: empty composition ID")
		}
	}
	for _, c := range p.Put {
		switch {
		case c == nil:
			return nil, errors.New("put: nil composition")
		case c.ID == "":
			return nil, errors.New("put: empty composition ID")
		case c.Version < 1:
			return nil, fmt.Errorf("put composition %s: invalid version %d", c.ID, c.Version)
		}
		data, err := EncodeComposition(c)
		if err != nil {
			return nil, err
		}
		op := PutOp{ID: c.ID, Version: c.Version, State: string(c.State), Host: c.Host, Data: data}
		seen := make(map[string]bool, len(c.Blocks)+len(c.Adding))
		for _, list := range [][]string{c.Blocks, c.Adding} {
			for _, b := range list {
				if !seen[b] {
					seen[b] = true
					op.Blocks = append(op.Blocks, b)
				}
			}
		}
		pp.Puts = append(pp.Puts, op)
	}
	return pp, nil
}

// Admit is how both backends begin a write: it refuses when ctx has
// ended or the store is closed (ErrClosed).
func Admit(ctx context.Context, closed bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if closed {
		return ErrClosed
	}
	return nil
}

// PrepareApply is how both backends' Apply begin: Admit, then Prepare. It
// returns nil and no error for a plan that changes and checks nothing,
// which the backend commits by doing nothing.
func PrepareApply(ctx context.Context, closed bool, p Plan) (*PreparedPlan, error) {
	if err := Admit(ctx, closed); err != nil {
		return nil, err
	}
	pp, err := Prepare(p)
	if err != nil || pp.Empty() {
		return nil, err
	}
	return pp, nil
}

// Empty reports whether pp changes and checks nothing.
func (pp *PreparedPlan) Empty() bool {
	return len(pp.Puts) == 0 && len(pp.Deletes) == 0 && len(pp.Audit) == 0 &&
		len(pp.Objects) == 0 && len(pp.Checks) == 0
}

// Limit is the most compositions block b may be in under pp: its Limits
// entry, and 1 for a block not listed or listed below 1.
func (pp *PreparedPlan) Limit(b string) int {
	if n := pp.Limits[b]; n > 1 {
		return n
	}
	return 1
}
