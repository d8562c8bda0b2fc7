package blocknode

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Heartbeat is what a blocknode tells the control plane.
type Heartbeat struct {
	Host, Endpoint             string
	Epoch                      uint64
	MaxDrives                  int
	ReadBytes, WriteBytes, Ops uint64
	// InUse lists the drives a client has a connection open to.
	InUse []string
}

// Controller is the control plane as a blocknode sees it: the answer to a
// heartbeat is the node's assignment (Sent is filled in by the Agent).
type Controller interface {
	Heartbeat(ctx context.Context, hb Heartbeat) (Assignment, error)
}

// Agent registers a Server with the control plane and heartbeats, applying
// each answer in the order the heartbeats were sent.
type Agent struct {
	Server    *Server
	Control   Controller
	Host      string
	Endpoint  string
	Epoch     uint64
	MaxDrives int
	Interval  time.Duration
	Logger    *slog.Logger

	mu     sync.Mutex // one heartbeat at a time: answers apply in order
	failed bool
}

// Beat sends one heartbeat and applies the answer. The node lease it
// grants starts when the heartbeat was sent, not when the answer came.
func (a *Agent) Beat(ctx context.Context) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	r, w, ops := a.Server.Load()
	sent := time.Now()
	ctx, cancel := context.WithTimeout(ctx, max(a.Interval*5, time.Second))
	defer cancel()
	asg, err := a.Control.Heartbeat(ctx, Heartbeat{Host: a.Host, Endpoint: a.Endpoint, Epoch: a.Epoch, MaxDrives: a.MaxDrives,
		ReadBytes: r, WriteBytes: w, Ops: ops, InUse: a.Server.InUse()})
	log := a.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err != nil {
		if !a.failed {
			log.Warn("heartbeat failed; the drives stop being served when the node lease lapses", "err", err)
		}
		a.failed = true
		return err
	}
	if a.failed {
		log.Info("heartbeat answered again")
	}
	a.failed = false
	if asg.LeaseTTL > 0 && a.Interval > asg.LeaseTTL/2 {
		log.Warn("heartbeat interval is more than half the node lease: the drives will flap", "interval", a.Interval, "lease", asg.LeaseTTL)
	}
	asg.Sent = sent
	a.Server.Apply(asg)
	return nil
}

// Run heartbeats every Interval until ctx ends.
func (a *Agent) Run(ctx context.Context) {
	t := time.NewTicker(a.Interval)
	defer t.Stop()
	for {
		_ = a.Beat(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
