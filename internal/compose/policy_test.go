package compose_test

import (
	"context"
	"errors"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"rackpool/internal/compose"
	"rackpool/internal/schedule"
	"rackpool/internal/store"
)

func TestPolicyDefault(t *testing.T) {
	e := newEnv(t, loadRack(t))
	if p := e.m.Policy(); p != compose.DefaultPolicy {
		t.Fatalf("policy of an empty store: %+v, want %+v", p, compose.DefaultPolicy)
	}
	if objs, err := e.store.Objects(ctx, compose.PolicyKind); err != nil || len(objs) != 0 {
		t.Fatalf("reading the default stored %v (%v)", objs, err)
	}
}

// TestPolicyRecord: a change commits the record at its next version, and
// a restart (a new manager on the store) reads it back.
func TestPolicyRecord(t *testing.T) {
	e := newEnv(t, loadRack(t))
	p, err := e.m.UpdatePolicy(ctx, func(p *compose.Policy) error {
		p.AllowOverprovisioning, p.ReservationDuration = true, 30*time.Second
		return nil
	})
	want := compose.Policy{AllowOverprovisioning: true, AllowZoneAffinity: true, ReservationDuration: 30 * time.Second, Version: 1}
	if err != nil || p != want || e.m.Policy() != want {
		t.Fatalf("UpdatePolicy = %+v, %v; Policy = %+v; want %+v", p, err, e.m.Policy(), want)
	}
	if p, err = e.m.UpdatePolicy(ctx, func(p *compose.Policy) error { p.AllowZoneAffinity = false; return nil }); err != nil {
		t.Fatal(err)
	}
	want.AllowZoneAffinity, want.Version = false, 2
	if p != want {
		t.Fatalf("second change: %+v, want %+v", p, want)
	}
	objs, err := e.store.Objects(ctx, compose.PolicyKind)
	if err != nil || len(objs) != 1 || objs[0].ID != compose.PolicyID || objs[0].Version != 2 {
		t.Fatalf("stored: %+v, %v", objs, err)
	}
	if got := e.manager(e.drivers).Policy(); got != want {
		t.Errorf("after a restart: %+v, want %+v", got, want)
	}
	// A change that fails, or asks for a duration out of range, stores nothing.
	refused := errors.New("refused")
	if _, err := e.m.UpdatePolicy(ctx, func(*compose.Policy) error { return refused }); err != refused {
		t.Errorf("change's error: %v", err)
	}
	for _, d := range []time.Duration{time.Millisecond, 8 * 24 * time.Hour} {
		if _, err := e.m.UpdatePolicy(ctx, func(p *compose.Policy) error { p.ReservationDuration = d; return nil }); !errors.Is(err, compose.ErrBadRequest) {
			t.Errorf("duration %s: %v, want ErrBadRequest", d, err)
		}
	}
	if got := e.m.Policy(); got != want {
		t.Errorf("after refused changes: %+v, want %+v", got, want)
	}
}

// TestPolicyFromSetting: a store written when the policy was a setting
// (the same JSON under the key composition-service) still loads, and the
// first change stores it as the record.
func TestPolicyFromSetting(t *testing.T) {
	e := newEnv(t, loadRack(t))
	const old = `{"allow_overprovisioning":true,"allow_zone_affinity":false,"reservation_seconds":90}`
	if err := e.store.PutSetting(ctx, "composition-service", old); err != nil {
		t.Fatal(err)
	}
	m := e.manager(e.drivers)
	want := compose.Policy{AllowOverprovisioning: true, ReservationDuration: 90 * time.Second}
	if got := m.Policy(); got != want {
		t.Fatalf("policy from the setting: %+v, want %+v", got, want)
	}
	p, err := m.UpdatePolicy(ctx, func(p *compose.Policy) error { p.AllowZoneAffinity = true; return nil })
	want.AllowZoneAffinity, want.Version = true, 1
	if err != nil || p != want {
		t.Fatalf("first change: %+v, %v; want %+v", p, err, want)
	}
	// The record wins over the setting from now on.
	if got := e.manager(e.drivers).Policy(); got != want {
		t.Errorf("after a restart: %+v, want %+v", got, want)
	}
	// A setting without a duration keeps the default one; garbage fails.
	e2 := newEnv(t, loadRack(t))
	if err := e2.store.PutSetting(ctx, "composition-service", `{"allow_zone_affinity":true}`); err != nil {
		t.Fatal(err)
	}
	if got := e2.manager(e2.drivers).Policy(); got != compose.DefaultPolicy {
		t.Errorf("setting without a duration: %+v, want the default", got)
	}
	if err := e2.store.PutSetting(ctx, "composition-service", `{`); err != nil {
		t.Fatal(err)
	}
	if _, err := compose.New(ctx, compose.Options{Topology: e2.top, Store: e2.store, Drivers: e2.drivers, Clock: e2.clk}); err == nil {
		t.Error("an undecodable setting was accepted")
	}
}

// TestPolicyReplicas: two managers on one store, as two replicas. A
// change at one reaches the other by ReloadPolicy; a change made on a
// stale copy conflicts in the store and is re-applied on the new policy,
// so neither replica's change is lost.
func TestPolicyReplicas(t *testing.T) {
	e := newEnv(t, loadRack(t))
	other := e.manager(e.drivers)
	if _, err := e.m.UpdatePolicy(ctx, func(p *compose.Policy) error { p.AllowOverprovisioning = true; return nil }); err != nil {
		t.Fatal(err)
	}
	if other.Policy().AllowOverprovisioning {
		t.Fatal("the other replica saw the change before reloading")
	}
	// other has not reloaded: its write at version 1 conflicts, it reads
	// version 1 and applies its change to it.
	calls := 0
	p, err := other.UpdatePolicy(ctx, func(p *compose.Policy) error {
		calls++
		p.ReservationDuration = time.Minute
		return nil
	})
	want := compose.Policy{AllowOverprovisioning: true, AllowZoneAffinity: true, ReservationDuration: time.Minute, Version: 2}
	if err != nil || p != want || calls != 2 {
		t.Fatalf("change on a stale copy: %+v, %v after %d calls; want %+v after 2", p, err, calls, want)
	}
	if err := e.m.ReloadPolicy(ctx); err != nil {
		t.Fatal(err)
	}
	if got := e.m.Policy(); got != want {
		t.Errorf("after ReloadPolicy: %+v, want %+v", got, want)
	}
}

// conflicting makes every Apply conflict.
type conflicting struct {
	store.Store
	applies atomic.Int32
}

func (c *conflicting) Apply(context.Context, store.Plan) error {
	c.applies.Add(1)
	return store.ErrConflict
}

// TestPolicyConflictBounded: a store that always conflicts ends the
// retries with the conflict.
func TestPolicyConflictBounded(t *testing.T) {
	e := newEnv(t, loadRack(t))
	c := &conflicting{Store: e.store}
	m, err := compose.New(ctx, compose.Options{Topology: e.top, Store: c, Drivers: e.drivers, Clock: e.clk})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.UpdatePolicy(ctx, func(p *compose.Policy) error { return nil }); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("UpdatePolicy = %v, want ErrConflict", err)
	}
	if n := c.applies.Load(); n != 4 {
		t.Errorf("%d applies, want 4 (one and three retries)", n)
	}
}

func TestApplyPolicy(t *testing.T) {
	zone := func(z string) *string { return &z }
	gpus := []schedule.Need{{Kind: "gpu", Count: 1, Exact: true}}
	for _, tc := range []struct {
		name     string
		policy   func(*compose.Policy)
		req      compose.Request
		want     compose.Request
		err      error
		needsOut bool // whether the needs come out exact
	}{
		{"nothing asked", nil, compose.Request{Needs: gpus}, compose.Request{Needs: gpus}, nil, true},
		{"overprovision not allowed", nil, compose.Request{Needs: gpus, Overprovision: true},
			compose.Request{Needs: gpus, Overprovision: true}, nil, true},
		{"overprovision allowed", func(p *compose.Policy) { p.AllowOverprovisioning = true },
			compose.Request{Needs: gpus, Overprovision: true}, compose.Request{Overprovision: true}, nil, false},
		{"host zone", nil, compose.Request{ZoneAffinity: zone("host2")},
			compose.Request{ZoneAffinity: zone("host2"), Host: "host2"}, nil, true},
		{"host zone, same host", nil, compose.Request{Host: "host2", ZoneAffinity: zone("host2")},
			compose.Request{ZoneAffinity: zone("host2"), Host: "host2"}, nil, true},
		{"topology zone", nil, compose.Request{ZoneAffinity: zone("zone-training")},
			compose.Request{ZoneAffinity: zone("zone-training"), Zone: "training"}, nil, true},
		{"host zone, other host", nil, compose.Request{Host: "host1", ZoneAffinity: zone("host2")},
			compose.Request{}, compose.ErrZoneConflict, true},
		{"unknown zone", nil, compose.Request{ZoneAffinity: zone("zone-nowhere")}, compose.Request{}, compose.ErrUnknownZone, true},
		{"empty zone", nil, compose.Request{ZoneAffinity: zone("")}, compose.Request{}, compose.ErrUnknownZone, true},
		{"bare topology zone", nil, compose.Request{ZoneAffinity: zone("training")}, compose.Request{}, compose.ErrUnknownZone, true},
		{"zone affinity off", func(p *compose.Policy) { p.AllowZoneAffinity = false; p.AllowOverprovisioning = true },
			compose.Request{Needs: gpus, Overprovision: true, ZoneAffinity: zone("host2")}, compose.Request{}, compose.ErrZoneAffinityOff, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, loadRack(t))
			if tc.policy != nil {
				if _, err := e.m.UpdatePolicy(ctx, func(p *compose.Policy) error { tc.policy(p); return nil }); err != nil {
					t.Fatal(err)
				}
			}
			in := tc.req
			in.Needs = append([]schedule.Need(nil), tc.req.Needs...)
			req, err := e.m.ApplyPolicy(in)
			if !errors.Is(err, tc.err) {
				t.Fatalf("ApplyPolicy = %v, want %v", err, tc.err)
			}
			if err != nil {
				if !errors.Is(err, compose.ErrBadRequest) {
					t.Errorf("refused request not a bad request: %v", err)
				}
				return
			}
			if req.Host != tc.want.Host || req.Zone != tc.want.Zone {
				t.Errorf("host %q zone %q, want %q %q", req.Host, req.Zone, tc.want.Host, tc.want.Zone)
			}
			for _, n := range req.Needs {
				if n.Exact != tc.needsOut {
					t.Errorf("need %+v: Exact %v, want %v", n, n.Exact, tc.needsOut)
				}
			}
			for _, n := range in.Needs {
				if !n.Exact {
					t.Errorf("the request given was changed: need %+v", n)
				}
			}
			// Idempotent: Place, Plan and the reservations may each apply
			// it to a request already applied.
			again, err := e.m.ApplyPolicy(req)
			if err != nil || again.Host != req.Host || again.Zone != req.Zone || !reflect.DeepEqual(again.Needs, req.Needs) {
				t.Errorf("applied twice: %+v, %v; once: %+v", again, err, req)
			}
		})
	}
}

// TestPolicyReservationDuration: a reservation without a duration of its
// own holds its blocks for the policy's.
func TestPolicyReservationDuration(t *testing.T) {
	e := newEnv(t, loadRack(t))
	if _, err := e.m.UpdatePolicy(ctx, func(p *compose.Policy) error { p.ReservationDuration = 30 * time.Second; return nil }); err != nil {
		t.Fatal(err)
	}
	r, err := e.m.Reserve(ctx, specific("host1", "gpu1"), 0)
	if err != nil {
		t.Fatal(err)
	}
	if d := r.ExpiresAt.Sub(r.CreatedAt); d != 30*time.Second {
		t.Errorf("reservation held for %s, want the policy's 30s", d)
	}
	if r, err := e.m.Reserve(ctx, specific("host2", "gpu2"), time.Minute); err != nil || r.ExpiresAt.Sub(r.CreatedAt) != time.Minute {
		t.Errorf("reservation with its own duration: %v, %v", r, err)
	}
	if _, err := e.m.Reserve(ctx, specific("host3", "gpu3"), -time.Second); !errors.Is(err, compose.ErrBadRequest) {
		t.Errorf("negative duration: %v, want ErrBadRequest", err)
	}
}
