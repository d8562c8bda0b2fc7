package compose_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"rackpool/internal/compose"
	"rackpool/internal/hostagent"
	"rackpool/internal/inventory"
)

// agent answers host steps from a hostagent.Broker the way `rackpool
// agent` does, with an answer the test chooses per operation, and records
// every step it took.
type agent struct {
	b    *hostagent.Broker
	host string

	mu    sync.Mutex
	fail  map[string]error // by op: the answer to give ("" op key: none)
	mute  bool             // take steps but never answer
	taken []compose.HostStep
}

func startAgent(t *testing.T, b *hostagent.Broker, host string) *agent {
	a := &agent{b: b, host: host, fail: map[string]error{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			for _, s := range b.Poll(ctx, host, 50*time.Millisecond) {
				a.mu.Lock()
				a.taken = append(a.taken, s)
				mute, failure := a.mute, a.fail[s.Op]
				a.mu.Unlock()
				if !mute {
					_ = b.Complete(host, s.ID, failure)
				}
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return a
}

func (a *agent) set(mute bool, fail map[string]error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.mute, a.fail = mute, fail
}

// ops lists the steps taken as "op:block,block".
func (a *agent) ops() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for _, s := range a.taken {
		out = append(out, s.Op+":"+strings.Join(s.Blocks, ","))
	}
	return out
}

// sagaEnv is env with a manager whose host1 and host2 are managed by a
// broker, each host step bounded by timeout; changes collects OnChange.
type sagaEnv struct {
	*env
	broker  *hostagent.Broker
	mu      sync.Mutex
	changes []compose.Change
}

func newSagaEnv(t *testing.T, timeout time.Duration) *sagaEnv {
	e := &sagaEnv{env: newEnv(t, loadRack(t)), broker: hostagent.NewBroker(hostagent.Options{Hosts: []string{"host1", "host2"}})}
	e.m = e.sagaManager(timeout)
	return e
}

func (e *sagaEnv) sagaManager(timeout time.Duration) *compose.Manager {
	e.t.Helper()
	m, err := compose.New(ctx, compose.Options{Topology: e.top, Store: e.store, Drivers: e.drivers, Clock: e.clk,
		Host: e.broker, HostTimeout: timeout, OnChange: func(ch compose.Change) {
			e.mu.Lock()
			e.changes = append(e.changes, ch)
			e.mu.Unlock()
		}})
	if err != nil {
		e.t.Fatalf("compose.New: %v", err)
	}
	return m
}

// failure returns the last "failed" change's error.
func (e *sagaEnv) failure() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i := len(e.changes) - 1; i >= 0; i-- {
		if e.changes[i].Reason == "failed" {
			return e.changes[i].Err
		}
	}
	return nil
}

// TestSagaHostSteps: on a managed host a composition is Composed only
// after the agent confirmed the attach, and decomposes only after it
// drained; an unmanaged host composes without its agent.
func TestSagaHostSteps(t *testing.T) {
	e := newSagaEnv(t, 5*time.Second)
	a := startAgent(t, e.broker, "host1")
	c := e.compose(specific("host1", "gpu1", "hdd1"))
	if want := []string{"attach:gpu1,hdd1"}; !slices.Equal(a.ops(), want) {
		t.Fatalf("agent took %q, want %q", a.ops(), want)
	}
	if c.State != inventory.Composed || c.Step != "" {
		t.Fatalf("composition is %s at step %q, want Composed with no step", c.State, c.Step)
	}
	e.checkConsistent()
	grown, err := e.m.Update(ctx, c.ID, compose.UpdateRequest{Blocks: []string{"ssd1"}, Remove: []string{"hdd1"}})
	if err != nil {
		t.Fatalf("update: %v", err)
	}
	if want := []string{"attach:gpu1,hdd1", "attach:ssd1", "detach:hdd1"}; !slices.Equal(a.ops(), want) {
		t.Fatalf("agent took %q, want %q", a.ops(), want)
	}
	if !slices.Equal(grown.Blocks, []string{"host1", "gpu1", "ssd1"}) {
		t.Fatalf("updated blocks %v", grown.Blocks)
	}
	e.checkConsistent()
	if err := e.m.Decompose(ctx, c.ID, 0); err != nil {
		t.Fatalf("decompose: %v", err)
	}
	if want := "detach:gpu1,ssd1"; a.ops()[len(a.ops())-1] != want {
		t.Fatalf("agent's last step %q, want %q", a.ops()[len(a.ops())-1], want)
	}
	// host3 is not managed: nothing waits for an agent there.
	e.compose(specific("host3", "gpu2"))
	e.checkConsistent()
}

// TestSagaHostTimeout: an agent that never answers makes the compose fail
// after the host timeout, naming the step; everything is rolled back and
// the "failed" change carries the same error.
func TestSagaHostTimeout(t *testing.T) {
	e := newSagaEnv(t, 200*time.Millisecond)
	a := startAgent(t, e.broker, "host1")
	a.set(true, nil)
	start := time.Now()
	_, err := e.m.Compose(ctx, specific("host1", "gpu1", "memnode1-b01"))
	var se *compose.StepError
	if !errors.As(err, &se) || se.Step != compose.StepHostAttach || !errors.Is(err, compose.ErrHostStep) {
		t.Fatalf("compose with a silent agent = %v, want a StepError for %s", err, compose.StepHostAttach)
	}
	if !strings.Contains(err.Error(), "host-attach") || !strings.Contains(err.Error(), "did not confirm") {
		t.Errorf("error %q does not name the step and the timeout", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("compose took %v with a 200ms host timeout", took)
	}
	if f := e.failure(); f == nil || !strings.Contains(f.Error(), "host-attach") {
		t.Errorf("failed event error = %v, want it to name host-attach", f)
	}
	// The compensation asked the agent to drain what it may have seen.
	if want := []string{"attach:gpu1,memnode1-b01", "detach:gpu1,memnode1-b01"}; !slices.Equal(a.ops(), want) {
		t.Errorf("agent was asked %q, want %q", a.ops(), want)
	}
	e.checkEmpty()
}

// TestSagaAgentRefuses: a refused attach rolls back with the agent's
// reason; a refused drain keeps the system Composed and attached.
func TestSagaAgentRefuses(t *testing.T) {
	e := newSagaEnv(t, 5*time.Second)
	a := startAgent(t, e.broker, "host1")
	a.set(false, map[string]error{"attach": errors.New("gpu1 not visible after rescan")})
	if _, err := e.m.Compose(ctx, specific("host1", "gpu1")); !errors.Is(err, compose.ErrHostStep) || !strings.Contains(err.Error(), "not visible after rescan") {
		t.Fatalf("compose refused by the agent = %v", err)
	}
	e.checkEmpty()

	a.set(false, map[string]error{"detach": errors.New("/data is mounted on sdb")})
	c := e.compose(specific("host1", "hdd1"))
	err := e.m.Decompose(ctx, c.ID, 0)
	var se *compose.StepError
	if !errors.As(err, &se) || se.Step != compose.StepHostDrain || !strings.Contains(err.Error(), "/data is mounted") {
		t.Fatalf("decompose with a refused drain = %v, want a StepError for %s with the agent's reason", err, compose.StepHostDrain)
	}
	got, err := e.m.Get(c.ID)
	if err != nil || got.State != inventory.Composed || got.Step != "" {
		t.Fatalf("after a refused drain: %+v, %v; want Composed", got, err)
	}
	e.checkConsistent()
	// The compensation put the drained device back on the host.
	if ops := a.ops(); ops[len(ops)-1] != "attach:hdd1" {
		t.Errorf("agent steps %q: want the last to re-attach hdd1", ops)
	}
	// An update whose drain is refused reverts entirely.
	if _, err := e.m.Update(ctx, c.ID, compose.UpdateRequest{Blocks: []string{"ssd2"}, Remove: []string{"hdd1"}}); !errors.Is(err, compose.ErrHostStep) {
		t.Fatalf("update with a refused drain = %v", err)
	}
	if got, _ := e.m.Get(c.ID); !slices.Equal(got.Blocks, []string{"host1", "hdd1"}) || got.State != inventory.Composed {
		t.Fatalf("after the refused update: %s", compose.Describe(got))
	}
	e.checkConsistent()
	a.set(false, nil)
	if err := e.m.Decompose(ctx, c.ID, 0); err != nil {
		t.Fatalf("decompose once the agent drains: %v", err)
	}
	e.checkEmpty()
}

// TestSagaResume: a control plane that crashed while a host step was
// pending resumes it after start-up: finished when the agent confirms,
// compensated when it refuses; a pending drain finishes the decompose.
func TestSagaResume(t *testing.T) {
	for _, tc := range []struct {
		name     string
		state    inventory.State
		step     string
		fail     map[string]error
		composed bool // the composition survives as Composed
	}{
		{"attach confirmed", inventory.Composing, compose.StepHostAttach, nil, true},
		{"attach refused", inventory.Composing, compose.StepHostAttach, map[string]error{"attach": errors.New("link down")}, false},
		{"drain done", inventory.Decomposing, compose.StepHostDrain, nil, false},
		{"drain refused", inventory.Decomposing, compose.StepHostDrain, map[string]error{"detach": errors.New("busy")}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newSagaEnv(t, 2*time.Second)
			at := e.clk.Now()
			c := &inventory.Composition{ID: "sys-crashed", Name: "sys-crashed", Host: "host2", State: tc.state, Step: tc.step,
				Version: 1, CreatedAt: at, UpdatedAt: at, Blocks: []string{"host2", "gpu5", "hdd3"},
				Ports: map[string]string{"gpu5": "pcie", "hdd3": "sas"}}
			e.put(c)
			e.attach(e.drivers, c, "gpu5", "hdd3")
			// The restarted control plane: fresh drivers (the emulation
			// forgot), the same store.
			_, e.drivers = e.freshDrivers()
			e.m = e.sagaManager(2 * time.Second)
			if got, err := e.m.Get(c.ID); err != nil || got.State != tc.state {
				t.Fatalf("before Resume: %v, %v; want it kept %s", got, err, tc.state)
			}
			a := startAgent(t, e.broker, "host2")
			a.set(false, tc.fail)
			e.m.Resume(ctx)
			if tc.composed {
				got, err := e.m.Get(c.ID)
				if err != nil || got.State != inventory.Composed {
					t.Fatalf("after Resume: %v, %v; want Composed", got, err)
				}
				e.checkConsistent()
			} else {
				e.checkEmpty()
			}
			if len(a.ops()) == 0 {
				t.Errorf("the agent was never asked")
			}
			t.Logf("agent steps: %q", a.ops())
		})
	}
}
