package compose

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"rackpool/internal/store"
)

// The composition policy: whether a request may be met with more than it
// asked for, whether it may name a resource zone, and how long a
// reservation holds its blocks (Redfish's CompositionService
// AllowOverprovisioning, AllowZoneAffinity and ReservationDuration). Like
// every holder of a decision it is a versioned record in the store (an
// object of PolicyKind with ID PolicyID), changed only by a plan with a
// version check (UpdatePolicy), read at New and read again by a replica
// that hears another one changed it (ReloadPolicy).

// PolicyKind is the store object kind of the composition policy record;
// PolicyID is its one object's ID. A store written before the policy was a
// record keeps it as the setting PolicyID, with the same JSON: it is read
// while no record exists, and the first change stores the record.
const (
	PolicyKind = "composition-policy"
	PolicyID   = "composition-service"
)

// DefaultReservationDuration is how long a reservation holds its blocks
// under the default policy.
const DefaultReservationDuration = 5 * time.Minute

// Reservation durations a policy may set.
const (
	MinReservationDuration = time.Second
	MaxReservationDuration = 7 * 24 * time.Hour
)

// Policy errors: the request names an annotation the policy refuses or
// that names nothing. They wrap ErrBadRequest.
var (
	// ErrZoneAffinityOff: the request names a zone while the policy has
	// AllowZoneAffinity false.
	ErrZoneAffinityOff = fmt.Errorf("%w: zone affinity is not allowed", ErrBadRequest)
	// ErrZoneConflict: the request names a host's zone and another host.
	ErrZoneConflict = fmt.Errorf("%w: zone conflicts with the requested host", ErrBadRequest)
	// ErrUnknownZone: the zone named is neither a host nor "zone-" and a
	// zone of the topology.
	ErrUnknownZone = fmt.Errorf("%w: no such resource zone", ErrBadRequest)
)

// Policy is the composition policy. Its zero value is not the default:
// start from DefaultPolicy.
type Policy struct {
	// AllowOverprovisioning lets a request that asks for it
	// (Request.Overprovision) be met with more than the counts it names.
	AllowOverprovisioning bool
	// AllowZoneAffinity lets a request name a resource zone
	// (Request.ZoneAffinity).
	AllowZoneAffinity bool
	// ReservationDuration is how long a reservation holds its blocks.
	ReservationDuration time.Duration
	// Version is the record's version, 0 while none is stored.
	Version int64
}

// DefaultPolicy is the policy of a store that has none: zone affinity
// allowed, no overprovisioning, reservations of five minutes.
var DefaultPolicy = Policy{AllowZoneAffinity: true, ReservationDuration: DefaultReservationDuration}

// Validate reports why p cannot be stored, if it cannot.
func (p Policy) Validate() error {
	if p.ReservationDuration < MinReservationDuration || p.ReservationDuration > MaxReservationDuration {
		return fmt.Errorf("%w: reservation duration %s is not between %s and %s", ErrBadRequest,
			p.ReservationDuration, MinReservationDuration, MaxReservationDuration)
	}
	return nil
}

// policyRecord is the policy's JSON in the store, the record's and the
// old setting's alike: rename a Go field freely, never a json tag.
type policyRecord struct {
	AllowOverprovisioning bool   `json:"allow_overprovisioning"`
	AllowZoneAffinity     bool   `json:"allow_zone_affinity"`
	ReservationSeconds    int64  `json:"reservation_seconds"`
	Note                  string `json:"note,omitempty"`
}

// decodePolicy reads a stored policy; a duration not above zero keeps the
// default's.
func decodePolicy(data []byte, version int64) (Policy, error) {
	var r policyRecord
	if err := json.Unmarshal(data, &r); err != nil {
		return Policy{}, err
	}
	p := Policy{AllowOverprovisioning: r.AllowOverprovisioning, AllowZoneAffinity: r.AllowZoneAffinity,
		ReservationDuration: DefaultReservationDuration, Version: version}
	if r.ReservationSeconds > 0 {
		p.ReservationDuration = time.Duration(r.ReservationSeconds) * time.Second
	}
	return p, nil
}

func encodePolicy(p Policy) []byte {
	data, _ := json.Marshal(policyRecord{AllowOverprovisioning: p.AllowOverprovisioning, AllowZoneAffinity: p.AllowZoneAffinity,
		ReservationSeconds: int64(p.ReservationDuration / time.Second)})
	return data
}

// policyState is the manager's copy of the policy record.
type policyState struct {
	mu sync.Mutex
	p  Policy
}

// Policy returns the composition policy as the manager last read or
// wrote it.
func (m *Manager) Policy() Policy {
	m.policy.mu.Lock()
	defer m.policy.mu.Unlock()
	return m.policy.p
}

// ReloadPolicy reads the policy record again: at New, and when another
// replica changed it. Without a record it reads the setting a store
// written before keeps, and without that the default.
func (m *Manager) ReloadPolicy(ctx context.Context) error {
	p, err := m.readPolicy(ctx)
	if err != nil {
		return err
	}
	m.policy.mu.Lock()
	defer m.policy.mu.Unlock()
	// A reload that read an older record than one this manager wrote
	// since keeps the newer.
	if p.Version >= m.policy.p.Version {
		m.policy.p = p
	}
	return nil
}

func (m *Manager) readPolicy(ctx context.Context) (Policy, error) {
	objs, err := m.store.Objects(ctx, PolicyKind)
	if err != nil {
		return Policy{}, fmt.Errorf("compose: read the composition policy: %w", err)
	}
	for _, o := range objs {
		if o.ID == PolicyID {
			p, err := decodePolicy(o.Data, o.Version)
			if err != nil {
				return Policy{}, fmt.Errorf("compose: composition policy: %w", err)
			}
			return p, nil
		}
	}
	raw, ok, err := m.store.Setting(ctx, PolicyID)
	if err != nil {
		return Policy{}, fmt.Errorf("compose: read the composition policy: %w", err)
	}
	if !ok {
		return DefaultPolicy, nil
	}
	p, err := decodePolicy([]byte(raw), 0)
	if err != nil {
		return Policy{}, fmt.Errorf("setting %s: %w", PolicyID, err)
	}
	return p, nil
}

// UpdatePolicy changes the policy with change, which edits the current
// one (it may be called again, on a newer policy, if another replica's
// change commits first), and commits the result with a version check. It
// returns the policy stored, or change's error, or an error wrapping
// ErrBadRequest for a policy that fails Validate.
func (m *Manager) UpdatePolicy(ctx context.Context, change func(*Policy) error) (Policy, error) {
	for attempt := 0; ; attempt++ {
		cur := m.Policy()
		next := cur
		if err := change(&next); err != nil {
			return Policy{}, err
		}
		if err := next.Validate(); err != nil {
			return Policy{}, err
		}
		next.Version = cur.Version + 1
		err := m.store.Apply(ctx, store.Plan{Objects: []store.ObjectChange{{Kind: PolicyKind,
			Object: store.Object{ID: PolicyID, Data: encodePolicy(next), Version: next.Version}}}})
		if errors.Is(err, store.ErrConflict) && attempt < 3 {
			if err := m.ReloadPolicy(ctx); err != nil {
				return Policy{}, err
			}
			continue
		}
		if err != nil {
			return Policy{}, fmt.Errorf("compose: store the composition policy: %w", err)
		}
		m.policy.mu.Lock()
		if next.Version > m.policy.p.Version {
			m.policy.p = next
		}
		m.policy.mu.Unlock()
		return next, nil
	}
}

// ApplyPolicy returns req with the policy applied to what it asks of it:
// Overprovision turns exact needs into at-least needs when the policy
// allows it (and is ignored otherwise); ZoneAffinity, refused when the
// policy disallows it, pins the host (a host's zone) or the topology zone
// ("zone-" + its ID). It returns an error wrapping ErrZoneAffinityOff,
// ErrZoneConflict or ErrUnknownZone. req is not changed (its Needs are
// copied), and applying the policy to its result again changes nothing:
// Place, Plan and the reservations apply it to every request they get.
func (m *Manager) ApplyPolicy(req Request) (Request, error) {
	p := m.Policy()
	if req.ZoneAffinity != nil {
		z := *req.ZoneAffinity
		if !p.AllowZoneAffinity {
			return req, fmt.Errorf("zone %q: %w", z, ErrZoneAffinityOff)
		}
		switch {
		case m.top.Host(z) != nil:
			if req.Host != "" && req.Host != z {
				return req, fmt.Errorf("zone of host %s, host %s: %w", z, req.Host, ErrZoneConflict)
			}
			req.Host = z
		case strings.HasPrefix(z, "zone-") && m.top.Zone(strings.TrimPrefix(z, "zone-")) != nil:
			req.Zone = strings.TrimPrefix(z, "zone-")
		default:
			return req, fmt.Errorf("zone %q: %w", z, ErrUnknownZone)
		}
	}
	if req.Overprovision && p.AllowOverprovisioning {
		req.Needs = slices.Clone(req.Needs)
		for i := range req.Needs {
			req.Needs[i].Exact = false
		}
	}
	return req, nil
}
