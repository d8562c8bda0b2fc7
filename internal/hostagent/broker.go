// Package hostagent is the control plane's side of the host agents
// (docs/southbound.md): the Broker hands the composition saga's host steps
// (rescan and confirm after an attach, drain before a detach) to the agent
// of each host, which long-polls for them and reports each outcome.
// hoststep/ holds what an agent does on its host.
//
// Steps live in the control plane's memory only; the step a composition
// waits on is in its store record (inventory.Composition.Step), so a
// restarted control plane asks again (compose.Manager.Resume). An agent
// that takes a step and dies before answering is offered it again once its
// claim lapses; agents make every step idempotent.
package hostagent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"rackpool/internal/compose"
)

// DefaultClaim is how long a step handed to an agent stays its own before
// it is offered again.
const DefaultClaim = 15 * time.Second

// Errors.
var (
	// ErrUnknownStep: no such step is waiting for this host (finished,
	// given up on, or never asked).
	ErrUnknownStep = errors.New("no such host step is pending")
	// ErrFailed wraps what the agent reported for a step that failed.
	ErrFailed = errors.New("the host agent reports")
)

// Broker implements compose.Host for the hosts it manages.
type Broker struct {
	all   bool
	hosts map[string]bool
	claim time.Duration

	mu    sync.Mutex
	steps map[string]*entry        // by step ID
	wake  map[string]chan struct{} // by host: closed when a step arrives
	seen  map[string]time.Time     // by host: last poll
	// kicked marks the hosts whose pollers Kick sent back: another
	// replica's workflow waits on a step of the host (docs/ha.md).
	kicked map[string]bool
}

type entry struct {
	step    compose.HostStep
	done    chan struct{}
	err     error
	claimed time.Time // zero: not handed out, or claim lapsed
}

// Options configure a Broker.
type Options struct {
	// Hosts lists the managed hosts; All manages every host.
	Hosts []string
	All   bool
	// Claim is how long an agent owns a step it took (default
	// DefaultClaim).
	Claim time.Duration
}

// NewBroker returns a broker managing o's hosts.
func NewBroker(o Options) *Broker {
	if o.Claim <= 0 {
		o.Claim = DefaultClaim
	}
	b := &Broker{all: o.All, hosts: map[string]bool{}, claim: o.Claim,
		steps: map[string]*entry{}, wake: map[string]chan struct{}{}, seen: map[string]time.Time{}, kicked: map[string]bool{}}
	for _, h := range o.Hosts {
		b.hosts[h] = true
	}
	return b
}

// ParseHosts reads serve's --host-agents value: "" or "none" (no host
// steps), "all", or a comma-separated list of host IDs, each checked by
// known.
func ParseHosts(v string, known func(string) bool) (Options, error) {
	switch v {
	case "", "none":
		return Options{}, nil
	case "all":
		return Options{All: true}, nil
	}
	var o Options
	for _, h := range strings.Split(v, ",") {
		h = strings.TrimSpace(h)
		if !known(h) {
			return Options{}, fmt.Errorf("host %q is not in the topology (want none, all, or host IDs separated by commas)", h)
		}
		o.Hosts = append(o.Hosts, h)
	}
	return o, nil
}

// Managed reports whether host's workflows wait for its agent.
func (b *Broker) Managed(host string) bool { return b.all || b.hosts[host] }

// Run hands s to its host's agent and waits for the agent's answer or the
// end of ctx. A step asked again while it is pending waits for the same
// answer.
func (b *Broker) Run(ctx context.Context, s compose.HostStep) error {
	b.mu.Lock()
	e := b.steps[s.ID]
	if e == nil {
		e = &entry{step: s, done: make(chan struct{})}
		b.steps[s.ID] = e
		b.wakeLocked(s.Host)
	}
	b.mu.Unlock()
	select {
	case <-e.done:
		return e.err
	case <-ctx.Done():
		b.mu.Lock()
		if b.steps[s.ID] == e {
			delete(b.steps, s.ID)
		}
		b.mu.Unlock()
		return ctx.Err()
	}
}

// wakeLocked wakes host's pollers. b.mu must be held.
func (b *Broker) wakeLocked(host string) {
	if ch, ok := b.wake[host]; ok {
		close(ch)
		delete(b.wake, host)
	}
}

// Kick ends the waits of host's pollers now, with no step: with several
// active replicas, a workflow at another replica waits on a step of host,
// and the agent's next poll is routed there (replica.Forward).
func (b *Broker) Kick(host string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, waiting := b.wake[host]; waiting {
		b.kicked[host] = true
		b.wakeLocked(host)
	}
}

// Poll returns host's pending steps that no live agent has claimed, and
// claims them. With none pending it waits up to wait (or ctx) for one, or
// until Kick.
func (b *Broker) Poll(ctx context.Context, host string, wait time.Duration) []compose.HostStep {
	end := time.Now().Add(wait)
	for {
		b.mu.Lock()
		now := time.Now()
		b.seen[host] = now
		if b.kicked[host] {
			delete(b.kicked, host)
			b.mu.Unlock()
			return nil
		}
		var out []compose.HostStep
		next := end // the poll ends, or a claim lapses
		for _, e := range b.steps {
			if e.step.Host != host {
				continue
			}
			if lapse := e.claimed.Add(b.claim); !now.Before(lapse) {
				e.claimed = now
				out = append(out, e.step)
			} else if lapse.Before(next) {
				next = lapse
			}
		}
		if len(out) > 0 {
			b.mu.Unlock()
			slices.SortFunc(out, func(x, y compose.HostStep) int { return strings.Compare(x.ID, y.ID) })
			return out
		}
		ch, ok := b.wake[host]
		if !ok {
			ch = make(chan struct{})
			b.wake[host] = ch
		}
		b.mu.Unlock()
		if !now.Before(end) {
			return nil
		}
		timer := time.NewTimer(next.Sub(now))
		select {
		case <-ch:
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return nil
		}
		timer.Stop()
	}
}

// Complete records the agent's answer to step id of host: nil for done,
// else what failed. It fails with ErrUnknownStep when no such step waits
// for that host.
func (b *Broker) Complete(host, id string, failure error) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.steps[id]
	if e == nil || e.step.Host != host {
		return fmt.Errorf("%w: %s for host %s", ErrUnknownStep, id, host)
	}
	delete(b.steps, id)
	if failure != nil {
		e.err = fmt.Errorf("%w: %w", ErrFailed, failure)
	}
	close(e.done)
	return nil
}

// Pending returns the steps waiting for host, for display.
func (b *Broker) Pending(host string) []compose.HostStep {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []compose.HostStep
	for _, e := range b.steps {
		if e.step.Host == host {
			out = append(out, e.step)
		}
	}
	slices.SortFunc(out, func(x, y compose.HostStep) int { return strings.Compare(x.ID, y.ID) })
	return out
}

// LastSeen returns when host's agent last polled (zero: never, since this
// control plane started).
func (b *Broker) LastSeen(host string) time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.seen[host]
}
