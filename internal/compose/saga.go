package compose

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"rackpool/internal/inventory"
	"rackpool/internal/store"
)

// A workflow is a saga (docs/southbound.md): an ordered list of steps, each
// with a timeout, a retry policy and a compensation.
//
//	step            timeout / retries                 compensation
//	fabric-attach   the driver's own (rfdriver:       fabric-detach
//	                backoff within its deadline)
//	host-attach     Options.HostTimeout; the agent    host-drain (bounded), then
//	                rescans until it is visible       fabric-detach
//	host-drain      Options.HostTimeout; the agent    host-attach of what was drained
//	                retries its drain                 (the system stays Composed)
//	fabric-detach   the driver's own                  none: the record stays
//	                                                  Decomposing, retried
//
// Host steps run only for hosts whose agent the Host hook manages. The
// step a workflow waits on is stored in Composition.Step before it starts,
// so a crash of serve mid-saga is settled at start-up: Resume retries the
// host step (agents are idempotent) and compensates when it fails again.

// Saga steps, as stored in Composition.Step and named in errors and events.
const (
	StepFabricAttach = "fabric-attach"
	StepHostAttach   = "host-attach"
	StepHostDrain    = "host-drain"
	StepFabricDetach = "fabric-detach"
)

// DefaultHostTimeout bounds one host step when Options.HostTimeout is zero.
const DefaultHostTimeout = time.Minute

// ErrHostStep: the host agent failed, refused or did not answer a host
// step in time; the workflow was compensated.
var ErrHostStep = errors.New("host step failed")

// Host is the composed host's side of a workflow, reached through the host
// agent that runs on it.
type Host interface {
	// Managed reports whether host's workflows include host steps.
	Managed(host string) bool
	// Run asks host's agent to take the step and waits for its answer
	// until ctx ends. It must be safe to ask again for a step already
	// taken: agents make each step idempotent.
	Run(ctx context.Context, s HostStep) error
}

// HostStep is one step for a host agent.
type HostStep struct {
	// ID names the step; the same step asked again (after a crash of the
	// control plane) keeps its ID.
	ID          string
	Composition string
	Host        string
	// Op is "attach" (rescan, then confirm the blocks are visible and
	// healthy) or "detach" (drain, then confirm they are gone).
	Op     string
	Blocks []string
	// Have lists the composition's other device blocks, already on the
	// host: an agent counting devices by model needs them.
	Have []string
	// Deadline is when the control plane gives up on the step.
	Deadline time.Time
}

// StepError says which saga step failed.
type StepError struct {
	Step        string
	Composition string
	Err         error
}

func (e *StepError) Error() string {
	return fmt.Sprintf("composition %s: step %s: %v", e.Composition, e.Step, e.Err)
}

func (e *StepError) Unwrap() error { return e.Err }

// managed reports whether c's host runs host steps.
func (m *Manager) managed(c *inventory.Composition) bool {
	return m.host != nil && c.Host != "" && m.host.Managed(c.Host)
}

// deviceBlocks keeps the blocks of list that are devices (a host step has
// nothing to do for the compute block).
func (m *Manager) deviceBlocks(list []string) []string {
	var out []string
	for _, id := range list {
		if b := m.top.Block(id); b != nil && b.Device != nil {
			out = append(out, id)
		}
	}
	return out
}

// hostStep runs one host step of c for blocks under the host timeout. op
// is "attach" or "detach". Nothing to do (no device blocks, or an
// unmanaged host) succeeds at once.
func (m *Manager) hostStep(ctx context.Context, c *inventory.Composition, op string, blocks []string, timeout time.Duration) error {
	blocks = m.deviceBlocks(blocks)
	if !m.managed(c) || len(blocks) == 0 {
		return nil
	}
	step := StepHostAttach
	if op == "detach" {
		step = StepHostDrain
	}
	have := slices.DeleteFunc(m.deviceBlocks(c.AllBlocks()), func(b string) bool { return slices.Contains(blocks, b) })
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	deadline, _ := ctx.Deadline()
	s := HostStep{ID: fmt.Sprintf("%s.%d.%s", c.ID, c.Version, op), Composition: c.ID, Host: c.Host, Op: op,
		Blocks: blocks, Have: have, Deadline: deadline}
	start := time.Now()
	err := m.host.Run(ctx, s)
	if err == nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	if errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("the agent on host %s did not confirm within %v", c.Host, timeout)
	}
	m.log.Info("host step", "id", c.ID, "step", step, "host", c.Host, "blocks", len(blocks), "took", time.Since(start), "err", err)
	if err != nil {
		return &StepError{Step: step, Composition: c.ID, Err: fmt.Errorf("%w: %w", ErrHostStep, err)}
	}
	return nil
}

// compensationTimeout bounds a compensating host step: long enough for a
// live agent, short enough that a dead one cannot hold a rollback up.
func (m *Manager) compensationTimeout() time.Duration { return min(m.hostTimeout, 10*time.Second) }

// atStep stores c (an intent record) at step, and returns the stored copy.
func (m *Manager) atStep(ctx context.Context, c *inventory.Composition, step string) (*inventory.Composition, error) {
	n := c.Clone()
	n.Step, n.Version, n.UpdatedAt = step, c.Version+1, m.clk.Now().UTC()
	if err := m.store.Apply(ctx, store.Plan{Put: []*inventory.Composition{n}, Limits: m.limits, Intent: true}); err != nil {
		return nil, fmt.Errorf("record step %s: %w", step, err)
	}
	m.mu.Lock()
	m.putComp(c.ID, n)
	m.mu.Unlock()
	return n, nil
}

// Resume settles the compositions a crash left waiting on a host step
// (recover keeps them, because host agents can reach the control plane
// only once it serves). Call it once, after the service accepts requests;
// it returns when every one is settled.
func (m *Manager) Resume(ctx context.Context) {
	m.mu.Lock()
	pending := m.resume
	m.resume = nil
	m.mu.Unlock()
	for _, c := range pending {
		if err := m.resumeOne(ctx, c); err != nil {
			m.log.Error("resume composition", "id", c.ID, "state", c.State, "step", c.Step, "err", err)
		}
	}
}

// resumeOne finishes or compensates one composition found at a host step.
func (m *Manager) resumeOne(ctx context.Context, c *inventory.Composition) error {
	m.log.Info("resuming composition", "id", c.ID, "state", c.State, "step", c.Step)
	// The fabric side first, again (idempotent): a driver that forgot its
	// attachments in the crash gets them back before the host looks.
	if c.State != inventory.Updating {
		if err := m.attach(ctx, c, c.Blocks); err != nil {
			m.log.Warn("re-attach before resuming", "id", c.ID, "err", err)
		}
	}
	switch {
	case c.State == inventory.Composing:
		if err := m.hostStep(ctx, c, "attach", c.Blocks, m.hostTimeout); err != nil {
			_ = m.hostStep(ctx, c, "detach", c.Blocks, m.compensationTimeout())
			if m.rollbackCompose(ctx, c) {
				m.mu.Lock()
				m.drop(c, c.Blocks)
				m.dropComp(c.ID)
				m.mu.Unlock()
			}
			m.notify(Change{Old: c, Reason: "failed", Err: err})
			return err
		}
		done := c.Clone()
		done.State, done.Step, done.Version, done.UpdatedAt = inventory.Composed, "", c.Version+1, m.clk.Now().UTC()
		if err := m.store.Apply(ctx, store.Plan{Put: []*inventory.Composition{done}, Limits: m.limits}); err != nil {
			return err
		}
		m.mu.Lock()
		m.putComp(c.ID, done)
		m.mu.Unlock()
		m.notify(Change{New: done.Clone(), Reason: "composed"})
	case c.State == inventory.Decomposing:
		m.mu.Lock()
		m.running[c.ID] = true
		m.mu.Unlock()
		return m.decompose(ctx, c)
	case c.State == inventory.Updating:
		// Roll the update back: drain what it was adding, put back on the
		// host what it was removing, then the fabric side as settle does.
		if c.Step == StepHostAttach {
			_ = m.hostStep(ctx, c, "detach", c.Adding, m.compensationTimeout())
		} else {
			_ = m.hostStep(ctx, c, "attach", c.Removing, m.compensationTimeout())
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.settle(ctx, c, func(f func()) { f() })
	}
	return nil
}

// updateHostSteps runs the host steps of an update whose fabric attaches
// are done: the host confirms the blocks *u adds, then drains the blocks
// it removes. *u moves on with each stored step (revert reads it). On a
// failure it compensates (puts back what was drained, drains what was
// added, detaches the additions from the fabrics), reverts the record
// and returns the step's error.
func (m *Manager) updateHostSteps(ctx context.Context, u **inventory.Composition, revert func() (*inventory.Composition, error)) error {
	if !m.managed(*u) {
		return nil
	}
	for _, st := range []struct {
		step, op string
		blocks   []string
	}{{StepHostAttach, "attach", (*u).Adding}, {StepHostDrain, "detach", (*u).Removing}} {
		if len(m.deviceBlocks(st.blocks)) == 0 {
			continue
		}
		at, err := m.atStep(ctx, *u, st.step)
		if err == nil {
			*u = at
			err = m.hostStep(ctx, at, st.op, st.blocks, m.hostTimeout)
		}
		if err == nil {
			continue
		}
		c := *u
		if st.op == "detach" {
			_ = m.hostStep(ctx, c, "attach", c.Removing, m.compensationTimeout())
		}
		_ = m.hostStep(ctx, c, "detach", c.Adding, m.compensationTimeout())
		if derr := m.detach(ctx, c, c.Adding); derr != nil {
			m.log.Error("rollback detach failed; recovery will finish it at start-up", "id", c.ID, "err", derr)
			return err
		}
		back, _ := revert()
		m.notify(Change{Old: c, New: back.Clone(), Reason: "failed", Err: err})
		return err
	}
	return nil
}
