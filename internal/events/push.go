package events

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"time"
)

// ProtocolRedfish is the only push protocol: the Redfish Event payload
// POSTed as JSON.
const ProtocolRedfish = "Redfish"

// Destination is a push subscription (a Redfish EventDestination): where to
// POST events, and which ones.
type Destination struct {
	ID string
	// URL is the http or https endpoint the payloads are POSTed to.
	URL string
	// Context is echoed in every payload.
	Context string
	// Protocol is ProtocolRedfish ("" means it).
	Protocol string
	// EventTypes, RegistryPrefixes and OriginResources filter the events
	// (see Match); empty lists match everything.
	EventTypes       []string
	RegistryPrefixes []string
	OriginResources  []string
	// Tenant owns the destination: it receives only events its tenant may
	// see ("" receives all).
	Tenant string
}

func (d Destination) clone() Destination {
	d.EventTypes = slices.Clone(d.EventTypes)
	d.RegistryPrefixes = slices.Clone(d.RegistryPrefixes)
	d.OriginResources = slices.Clone(d.OriginResources)
	return d
}

// Validate checks that d has an ID, an absolute http or https URL with a
// host, and the Redfish protocol. The error wraps ErrInvalidDestination.
func (d Destination) Validate() error {
	if d.ID == "" {
		return fmt.Errorf("%w: no ID", ErrInvalidDestination)
	}
	u, err := url.Parse(d.URL)
	if err != nil {
		return fmt.Errorf("%w: destination %s: URL: %v", ErrInvalidDestination, d.ID, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%w: destination %s: URL %q is not an absolute http or https URL", ErrInvalidDestination, d.ID, d.URL)
	}
	if d.Protocol != "" && d.Protocol != ProtocolRedfish {
		return fmt.Errorf("%w: destination %s: protocol %q is not %s", ErrInvalidDestination, d.ID, d.Protocol, ProtocolRedfish)
	}
	return nil
}

// deliverer is one destination's queue and the goroutine that empties it.
type deliverer struct {
	dest   Destination
	queue  chan Event
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
}

// AddDestination starts pushing the events that Match d to d.URL. It fails
// with ErrInvalidDestination (see Destination.Validate), with
// ErrDestinationExists when d.ID is taken, and with ErrClosed after Close.
// Only events published after it returns are pushed.
func (b *Bus) AddDestination(d Destination) error {
	if err := d.Validate(); err != nil {
		return err
	}
	d = d.clone()
	if d.Protocol == "" {
		d.Protocol = ProtocolRedfish
	}
	ctx, cancel := context.WithCancel(context.Background())
	dl := &deliverer{dest: d, queue: make(chan Event, destinationQueue), ctx: ctx, cancel: cancel, done: make(chan struct{})}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.closed:
		cancel()
		return ErrClosed
	case b.dests[d.ID] != nil:
		cancel()
		return fmt.Errorf("%w: %s", ErrDestinationExists, d.ID)
	}
	b.dests[d.ID] = dl
	go b.deliver(dl)
	return nil
}

// RemoveDestination stops pushing to destination id, abandoning what is
// still queued for it and any POST in flight, and waits for its deliverer
// to stop. It reports whether there was such a destination.
func (b *Bus) RemoveDestination(id string) bool {
	b.mu.Lock()
	dl := b.dests[id]
	delete(b.dests, id)
	b.mu.Unlock()
	if dl == nil {
		return false
	}
	dl.cancel()
	<-dl.done
	return true
}

// Destinations returns the current destinations ordered by ID.
func (b *Bus) Destinations() []Destination {
	b.mu.Lock()
	out := make([]Destination, 0, len(b.dests))
	for _, dl := range b.dests {
		out = append(out, dl.dest.clone())
	}
	b.mu.Unlock()
	slices.SortFunc(out, func(x, y Destination) int { return cmp.Compare(x.ID, y.ID) })
	return out
}

// deliver is a destination's goroutine: it takes the next event and
// whatever else is queued (up to maxBatch) and POSTs them as one payload.
func (b *Bus) deliver(dl *deliverer) {
	defer close(dl.done)
	batch := make([]Event, 0, maxBatch)
	for {
		select {
		case <-dl.ctx.Done():
			return
		case e := <-dl.queue:
			batch = append(batch[:0], e)
		}
	fill:
		for len(batch) < maxBatch {
			select {
			case e := <-dl.queue:
				batch = append(batch, e)
			default:
				break fill
			}
		}
		b.post(dl, batch)
	}
}

// post POSTs one payload, up to DeliveryTries times with a doubling
// backoff between tries, and counts the outcome.
func (b *Bus) post(dl *deliverer, batch []Event) {
	body := Payload(dl.dest, batch...)
	wait := b.backoff
	for try := 1; ; try++ {
		err := b.postOnce(dl.ctx, dl.dest.URL, body)
		if err == nil {
			b.delivered.Add(uint64(len(batch)))
			return
		}
		if dl.ctx.Err() != nil {
			return // removed or closed: nobody to count for
		}
		if try == DeliveryTries {
			b.deliveryFailed.Add(uint64(len(batch)))
			b.log.Error("event delivery failed; events dropped", "destination", dl.dest.ID,
				"events", len(batch), "first", batch[0].ID, "tries", try, "err", err)
			return
		}
		b.log.Warn("event delivery failed; retrying", "destination", dl.dest.ID, "try", try, "in", wait, "err", err)
		t := time.NewTimer(wait)
		select {
		case <-dl.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		wait *= 2
	}
}

// postOnce POSTs body to u within DeliveryTimeout; any 2xx status is
// success.
func (b *Bus) postOnce(ctx context.Context, u string, body []byte) error {
	ctx, cancel := context.WithTimeout(ctx, DeliveryTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := b.client.Do(req)
	if err != nil {
		return err
	}
	// Drain a little so the connection can be reused.
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("status %s", resp.Status)
	}
	return nil
}
