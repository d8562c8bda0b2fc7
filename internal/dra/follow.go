package dra

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"k8s.io/dynamic-resource-allocation/resourceslice"

	"rackpool/api"
	"rackpool/internal/inventory"
	"rackpool/internal/topology"
)

// Free reads which blocks rackpool has free now (unused and healthy) and
// which have failed (health Critical) while in no composition.
func Free(ctx context.Context, c *api.Client) (free, failed map[string]bool, err error) {
	blocks, err := c.Blocks(ctx)
	if err != nil {
		return nil, nil, err
	}
	free, failed = map[string]bool{}, map[string]bool{}
	for _, b := range blocks {
		switch {
		case b.Status.Health == "Critical" && len(b.Links.ComputerSystems) == 0 && b.Oem.Rackpool.HeldBy == "":
			failed[b.ID] = true
		case b.CompositionStatus.CompositionState == "Unused" && b.Status.Health != "Critical":
			free[b.ID] = true
		}
	}
	return free, failed, nil
}

// coalesce is how long Follow waits after an event for the rest of its
// burst (a compose sends several) before it reads the pool again.
const coalesce = 20 * time.Millisecond

// Follow keeps what publish publishes in step with rackpool's pool: it
// reads the pool and publishes it, then again after every event of
// rackpool's event stream (EventService/SSE), a burst read once. A broken
// stream is opened again with backoff, and the pool read again, so a change
// made while it was down is not missed. Failed devices are published
// tainted (Taint) while taints is true (nil: always), and left out when it
// is not; a value on again makes it read and publish the pool again (nil:
// never). It returns when ctx ends.
func Follow(ctx context.Context, c *api.Client, top *topology.Topology, publish func(*resourceslice.DriverResources), taints *atomic.Bool,
	again <-chan struct{}, log *slog.Logger) {
	changed := make(chan struct{}, 1)
	poke := func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-again:
				poke()
			}
		}
	}()
	go func() {
		for backoff := 100 * time.Millisecond; ctx.Err() == nil; {
			opened, err := stream(ctx, c, poke)
			if ctx.Err() != nil {
				return
			}
			if opened {
				backoff = 100 * time.Millisecond
			}
			log.Warn("dra: rackpool's event stream ended; opening it again", "err", err, "in", backoff)
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 5*time.Second)
		}
	}()
	poke()
	for {
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
		select { // the rest of the burst
		case <-ctx.Done():
			return
		case <-time.After(coalesce):
		}
		select {
		case <-changed:
		default:
		}
		free, failed, err := Free(ctx, c)
		if err != nil {
			log.Warn("dra: read rackpool's pool", "err", err)
			go func() { time.Sleep(time.Second); poke() }()
			continue
		}
		if taints != nil && !taints.Load() {
			failed = nil
		}
		pools := Devices(top, func(b *inventory.Block) bool { return free[b.ID] || failed[b.ID] })
		Taint(pools, failed)
		publish(Resources(pools))
	}
}

// stream reads rackpool's event stream until it ends, poking on every
// event and once when it opens (what changed before is read then). opened
// says whether the stream was opened at all.
func stream(ctx context.Context, c *api.Client, poke func()) (opened bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.URL+"/redfish/v1/EventService/SSE", nil)
	if err != nil {
		return false, err
	}
	req.SetBasicAuth(c.User, c.Password)
	req.Header.Set("Accept", "text/event-stream")
	hc := *c.HTTP
	hc.Timeout = 0 // a stream: ctx ends it
	resp, err := hc.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false, fmt.Errorf("GET %s: %s", req.URL.Path, resp.Status)
	}
	poke()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "data:") {
			poke()
		}
	}
	if err := sc.Err(); err != nil {
		return true, err
	}
	return true, fmt.Errorf("the stream ended")
}
