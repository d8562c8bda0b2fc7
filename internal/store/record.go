package store

import (
	"encoding/json"
	"fmt"
	"time"

	"rackpool/internal/inventory"
)

// record is the JSON a backend stores for a composition (EncodeComposition). Its field names are the
// on-disk format: rename a Go field freely, never a json tag. The version
// lives only in its column.
type record struct {
	ID          string            `json:"id"`
	Name        string            `json:"name,omitempty"`
	Host        string            `json:"host,omitempty"`
	Blocks      []string          `json:"blocks,omitempty"`
	Ports       map[string]string `json:"ports,omitempty"`
	State       string            `json:"state"`
	Adding      []string          `json:"adding,omitempty"`
	Removing    []string          `json:"removing,omitempty"`
	CreatedAt   time.Time         `json:"created_at"`
	UpdatedAt   time.Time         `json:"updated_at"`
	Description string            `json:"description,omitempty"`
	Tenant      string            `json:"tenant,omitempty"`
	ExpiresAt   *time.Time        `json:"expires_at,omitempty"`
	Group       string            `json:"group,omitempty"`
	Step        string            `json:"step,omitempty"`
	Owner       string            `json:"owner,omitempty"`
	Power       *powerRecord      `json:"power,omitempty"`
}

// powerRecord is a composition's power state and boot override; absent
// for a system that is Off with no override.
type powerRecord struct {
	State          string     `json:"state,omitempty"`
	Reset          string     `json:"reset,omitempty"`
	Since          *time.Time `json:"since,omitempty"`
	BootEnabled    string     `json:"boot_enabled,omitempty"`
	BootTarget     string     `json:"boot_target,omitempty"`
	BootMode       string     `json:"boot_mode,omitempty"`
	BootUefiTarget string     `json:"boot_uefi_target,omitempty"`
	BootNext       string     `json:"boot_next,omitempty"`
}

func encodePower(p inventory.Power) *powerRecord {
	if p == (inventory.Power{}) {
		return nil
	}
	r := &powerRecord{State: p.State, Reset: p.Reset, BootEnabled: p.Boot.Enabled, BootTarget: p.Boot.Target,
		BootMode: p.Boot.Mode, BootUefiTarget: p.Boot.UefiTarget, BootNext: p.Boot.BootNext}
	if !p.Since.IsZero() {
		t := p.Since.UTC()
		r.Since = &t
	}
	return r
}

func decodePower(r *powerRecord) inventory.Power {
	if r == nil {
		return inventory.Power{}
	}
	return inventory.Power{State: r.State, Reset: r.Reset, Since: expiresAt(r.Since),
		Boot: inventory.Boot{Enabled: r.BootEnabled, Target: r.BootTarget, Mode: r.BootMode, UefiTarget: r.BootUefiTarget, BootNext: r.BootNext}}
}

// EncodeComposition returns the JSON a backend stores for c, with its
// times in UTC. The version is not in it: backends keep it in a column.
func EncodeComposition(c *inventory.Composition) ([]byte, error) {
	var expires *time.Time
	if !c.ExpiresAt.IsZero() {
		t := c.ExpiresAt.UTC()
		expires = &t
	}
	b, err := json.Marshal(record{
		ID:          c.ID,
		Name:        c.Name,
		Host:        c.Host,
		Blocks:      c.Blocks,
		Ports:       c.Ports,
		State:       string(c.State),
		Adding:      c.Adding,
		Removing:    c.Removing,
		CreatedAt:   c.CreatedAt.UTC(),
		UpdatedAt:   c.UpdatedAt.UTC(),
		Description: c.Description,
		Tenant:      c.Tenant,
		ExpiresAt:   expires,
		Group:       c.Group,
		Step:        c.Step,
		Owner:       c.Owner,
		Power:       encodePower(c.Power),
	})
	if err != nil {
		return nil, fmt.Errorf("encode composition %s: %w", c.ID, err)
	}
	return b, nil
}

// DecodeComposition rebuilds a composition from what EncodeComposition
// wrote and its version. Empty block lists come back nil; times come back in
// UTC.
func DecodeComposition(version int64, data []byte) (*inventory.Composition, error) {
	var r record
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("decode composition: %w", err)
	}
	return &inventory.Composition{
		ID:          r.ID,
		Name:        r.Name,
		Host:        r.Host,
		Blocks:      r.Blocks,
		Ports:       r.Ports,
		State:       inventory.State(r.State),
		Adding:      r.Adding,
		Removing:    r.Removing,
		Version:     version,
		CreatedAt:   r.CreatedAt.UTC(),
		UpdatedAt:   r.UpdatedAt.UTC(),
		Description: r.Description,
		Tenant:      r.Tenant,
		ExpiresAt:   expiresAt(r.ExpiresAt),
		Group:       r.Group,
		Step:        r.Step,
		Owner:       r.Owner,
		Power:       decodePower(r.Power),
	}, nil
}

func expiresAt(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}

// ScanCompositions reads every row of a query that selects a composition's
// version and EncodeComposition data, in that order.
func ScanCompositions(rows Rows) ([]*inventory.Composition, error) {
	var out []*inventory.Composition
	for rows.Next() {
		var (
			version int64
			data    []byte
		)
		if err := rows.Scan(&version, &data); err != nil {
			return nil, err
		}
		c, err := DecodeComposition(version, data)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// ScanObjects reads every row of a query that selects an object's ID, data
// and version, in that order.
func ScanObjects(rows Rows) ([]Object, error) {
	var out []Object
	for rows.Next() {
		var o Object
		if err := rows.Scan(&o.ID, &o.Data, &o.Version); err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, rows.Err()
}
