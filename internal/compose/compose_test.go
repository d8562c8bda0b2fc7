package compose_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"rackpool/internal/compose"
	"rackpool/internal/fabric"
	"rackpool/internal/fabric/faulty"
	"rackpool/internal/inventory"
	"rackpool/internal/schedule"
	"rackpool/internal/units"
)

func TestCompose(t *testing.T) {
	top := loadRack(t)
	tests := []struct {
		name string
		req  compose.Request
		// On success: the host, and either the exact blocks or the
		// device blocks wanted by kind.
		host   string
		blocks []string
		kinds  map[inventory.Kind]int
		// On failure.
		wantErr     error
		unsatisfied bool
	}{
		{
			name:   "specific host and blocks on every fabric",
			req:    specific("host1", "gpu1", "hdd1", "memnode1-b01", "essd1"),
			host:   "host1",
			blocks: []string{"host1", "gpu1", "hdd1", "memnode1-b01", "essd1"},
		},
		{
			name:   "compute block named among the blocks",
			req:    specific("", "host3", "nvme2"),
			host:   "host3",
			blocks: []string{"host3", "nvme2"},
		},
		{
			name:   "specific block picks the only host reaching it",
			req:    specific("", "gpu5"), // drawer2 slots 1-4 reach only host2
			host:   "host2",
			blocks: []string{"host2", "gpu5"},
		},
		{
			name: "constrained needs",
			req: compose.Request{Name: "train", Needs: []schedule.Need{
				{Kind: inventory.GPU, Count: 2},
				{Kind: inventory.Memory, CapacityBytes: 16 * units.GiB},
				{Kind: inventory.HDD, Count: 1},
			}},
			kinds: map[inventory.Kind]int{inventory.Compute: 1, inventory.GPU: 2, inventory.Memory: 2, inventory.HDD: 1},
		},
		{
			name: "constrained model picks the only host reaching it",
			req: compose.Request{Needs: []schedule.Need{
				{Kind: inventory.GPU, Count: 3, Model: "A100"},
			}},
			host:  "host2",
			kinds: map[inventory.Kind]int{inventory.Compute: 1, inventory.GPU: 3},
		},
		{
			name: "constrained on a named host",
			req: compose.Request{Host: "host4", Needs: []schedule.Need{
				{Kind: inventory.NVMe, Count: 2}, {Kind: inventory.SSD, Count: 3},
			}},
			host:  "host4",
			kinds: map[inventory.Kind]int{inventory.Compute: 1, inventory.NVMe: 2, inventory.SSD: 3},
		},
		{
			name: "more GPUs than exist",
			req: compose.Request{Needs: []schedule.Need{
				{Kind: inventory.GPU, Count: 9},
			}},
			unsatisfied: true,
		},
		{
			name: "host that reaches no GPU",
			req: compose.Request{Host: "host4", Needs: []schedule.Need{
				{Kind: inventory.GPU, Count: 1},
			}},
			unsatisfied: true,
		},
		{
			name:        "specific block the host cannot reach",
			req:         specific("host1", "gpu1", "gpu5"),
			unsatisfied: true,
		},
		{
			name:        "another host's compute block",
			req:         specific("host1", "host2"),
			unsatisfied: true,
		},
		{
			name:    "unknown block",
			req:     specific("host1", "gpu99"),
			wantErr: schedule.ErrUnknownBlock,
		},
		{
			name:    "unknown host",
			req:     specific("host9", "gpu1"),
			wantErr: schedule.ErrUnknownHost,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, top)
			c, err := e.m.Compose(ctx, tt.req)
			if tt.wantErr != nil || tt.unsatisfied {
				var u *schedule.Unsatisfiable
				switch {
				case err == nil:
					t.Fatalf("compose succeeded with %s, want an error", compose.Describe(c))
				case tt.unsatisfied && !errors.As(err, &u):
					t.Fatalf("compose: %v, want *schedule.Unsatisfiable", err)
				case tt.wantErr != nil && !errors.Is(err, tt.wantErr):
					t.Fatalf("compose: %v, want %v", err, tt.wantErr)
				}
				e.checkEmpty()
				return
			}
			if err != nil {
				t.Fatalf("compose: %v", err)
			}
			if c.State != inventory.Composed || c.Version != 2 {
				t.Errorf("got %s at version %d, want Composed at version 2", c.State, c.Version)
			}
			if tt.host != "" && c.Host != tt.host {
				t.Errorf("host %s, want %s", c.Host, tt.host)
			}
			if len(c.Blocks) == 0 || c.Blocks[0] != c.Host {
				t.Errorf("blocks %v do not start with the compute block %s", c.Blocks, c.Host)
			}
			if tt.blocks != nil && !slices.Equal(c.Blocks, tt.blocks) {
				t.Errorf("blocks %v, want %v", c.Blocks, tt.blocks)
			}
			if tt.kinds != nil {
				if got := blocksOfKind(top, c); !mapsEqual(got, tt.kinds) {
					t.Errorf("blocks by kind %v, want %v", got, tt.kinds)
				}
			}
			if tt.req.Name != "" && c.Name != tt.req.Name {
				t.Errorf("name %q, want %q", c.Name, tt.req.Name)
			}
			if got, err := e.m.Get(c.ID); err != nil || summary(got) != summary(c) {
				t.Errorf("Get = %v, %v; want %s", got, err, summary(c))
			}
			for _, b := range c.Blocks {
				st := e.m.BlockStatus(b)
				if st.State != "Composed" || !slices.Equal(st.Compositions, []string{c.ID}) {
					t.Errorf("block %s is %s in %v, want Composed in [%s]", b, st.State, st.Compositions, c.ID)
				}
			}
			e.checkConsistent()
			if got := discovered(t, e.drivers); len(got) != len(c.Blocks)-1 {
				t.Errorf("fabrics have %d attachments, want %d: %q", len(got), len(c.Blocks)-1, got)
			}
		})
	}
}

func mapsEqual[K comparable, V comparable](a, b map[K]V) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func TestComposeHostInUse(t *testing.T) {
	e := newEnv(t, loadRack(t))
	a := e.compose(specific("host1", "gpu1"))
	var u *schedule.Unsatisfiable
	if _, err := e.m.Compose(ctx, specific("host1", "gpu2")); !errors.As(err, &u) {
		t.Errorf("compose on a composed host: %v, want *schedule.Unsatisfiable", err)
	}
	if _, err := e.m.Compose(ctx, specific("host2", "gpu1")); !errors.As(err, &u) {
		t.Errorf("compose of a composed exclusive block: %v, want *schedule.Unsatisfiable", err)
	}
	if l := e.m.List(); len(l) != 1 || l[0].ID != a.ID {
		t.Errorf("list %q, want only %s", summaries(l), a.ID)
	}
	e.checkConsistent()
}

func TestDecompose(t *testing.T) {
	top := loadRack(t)
	tests := []struct {
		name    string
		id      func(c *inventory.Composition) string
		version func(c *inventory.Composition) int64
		wantErr error
	}{
		{name: "any version", id: func(c *inventory.Composition) string { return c.ID }},
		{name: "current version", id: func(c *inventory.Composition) string { return c.ID },
			version: func(c *inventory.Composition) int64 { return c.Version }},
		{name: "stale version", id: func(c *inventory.Composition) string { return c.ID },
			version: func(c *inventory.Composition) int64 { return c.Version - 1 }, wantErr: compose.ErrVersion},
		{name: "unknown", id: func(*inventory.Composition) string { return "sys-000000000000" }, wantErr: compose.ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, top)
			keep := e.compose(specific("host2", "gpu2", "nic1"))
			c := e.compose(specific("host1", "gpu1", "nic1", "hdd1", "memnode1-b01", "memnode1-b02", "essd1"))
			var v int64
			if tt.version != nil {
				v = tt.version(c)
			}
			err := e.m.Decompose(ctx, tt.id(c), v)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("decompose: %v, want %v", err, tt.wantErr)
				}
				if got, err := e.m.Get(c.ID); err != nil || summary(got) != summary(c) {
					t.Errorf("after a refused decompose Get = %v, %v; want %s unchanged", got, err, summary(c))
				}
				e.checkConsistent()
				return
			}
			if err != nil {
				t.Fatalf("decompose: %v", err)
			}
			if _, err := e.m.Get(c.ID); !errors.Is(err, compose.ErrNotFound) {
				t.Errorf("Get after decompose: %v, want ErrNotFound", err)
			}
			for _, b := range c.Blocks {
				want := "Unused"
				if b == "nic1" {
					want = "ComposedAndAvailable" // still in keep
				}
				if st := e.m.BlockStatus(b); st.State != want {
					t.Errorf("block %s is %s in %v, want %s", b, st.State, st.Compositions, want)
				}
			}
			if l := e.m.List(); len(l) != 1 || l[0].ID != keep.ID {
				t.Errorf("list %q, want only %s", summaries(l), keep.ID)
			}
			e.checkConsistent()
			// Idempotency at the API: the second decompose finds nothing.
			if err := e.m.Decompose(ctx, c.ID, 0); !errors.Is(err, compose.ErrNotFound) {
				t.Errorf("second decompose: %v, want ErrNotFound", err)
			}
			e.checkConsistent()
		})
	}
}

func TestUpdate(t *testing.T) {
	top := loadRack(t)
	base := []string{"host1", "gpu1", "hdd1", "memnode1-b01"}
	tests := []struct {
		name string
		// Either add and remove or, with set non-nil, set.
		add    compose.UpdateRequest
		remove []string
		set    []string
		stale  bool // pass an outdated expectVersion
		id     string
		// On success: the exact blocks, or base plus blocks of kinds.
		want  []string
		kinds map[inventory.Kind]int
		// On failure.
		wantErr     error
		unsatisfied bool
	}{
		{name: "add specific", add: compose.UpdateRequest{Blocks: []string{"gpu2", "essd1"}},
			want: []string{"host1", "gpu1", "hdd1", "memnode1-b01", "gpu2", "essd1"}},
		{name: "add needs", add: compose.UpdateRequest{Needs: []schedule.Need{{Kind: inventory.Memory, CapacityBytes: 16 * units.GiB}, {Kind: inventory.SSD, Count: 2}}},
			kinds: map[inventory.Kind]int{inventory.Compute: 1, inventory.GPU: 1, inventory.HDD: 1, inventory.Memory: 3, inventory.SSD: 2}},
		{name: "remove", remove: []string{"hdd1", "memnode1-b01"},
			want: []string{"host1", "gpu1"}},
		{name: "add and remove", add: compose.UpdateRequest{Blocks: []string{"hdd2"}}, remove: []string{"hdd1"},
			want: []string{"host1", "gpu1", "memnode1-b01", "hdd2"}},
		{name: "set blocks", set: []string{"host1", "gpu1", "essd2", "memnode2-b05"},
			want: []string{"host1", "gpu1", "essd2", "memnode2-b05"}},
		{name: "set the same blocks", set: base, want: base},
		{name: "nothing to do", want: base},
		{name: "remove the compute block", remove: []string{"host1"}, wantErr: compose.ErrBadRequest},
		{name: "set without the compute block", set: []string{"gpu1"}, wantErr: compose.ErrBadRequest},
		{name: "set an empty list", set: []string{}, wantErr: compose.ErrBadRequest},
		{name: "set and add at once", set: base, add: compose.UpdateRequest{Blocks: []string{"gpu2"}}, wantErr: compose.ErrBadRequest},
		{name: "remove a block not held", remove: []string{"gpu2"}, wantErr: compose.ErrBadRequest},
		{name: "remove a block twice", remove: []string{"gpu1", "gpu1"}, wantErr: compose.ErrBadRequest},
		{name: "add a block already held", add: compose.UpdateRequest{Blocks: []string{"gpu1"}}, wantErr: compose.ErrBadRequest},
		{name: "stale version", add: compose.UpdateRequest{Blocks: []string{"gpu2"}}, stale: true, wantErr: compose.ErrVersion},
		{name: "stale version set", set: []string{"host1"}, stale: true, wantErr: compose.ErrVersion},
		{name: "unknown composition", id: "sys-000000000000", remove: []string{"gpu1"}, wantErr: compose.ErrNotFound},
		{name: "add unknown block", add: compose.UpdateRequest{Blocks: []string{"gpu99"}}, wantErr: schedule.ErrUnknownBlock},
		{name: "add unreachable block", add: compose.UpdateRequest{Blocks: []string{"gpu5"}}, unsatisfied: true},
		{name: "add a block another holds", add: compose.UpdateRequest{Blocks: []string{"gpu2"}}, remove: []string{"hdd1"}, unsatisfied: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, top)
			other := e.compose(specific("host3", "gpu3", "nic1"))
			c := e.compose(specific("host1", base[1:]...))
			if tt.name == "add a block another holds" {
				if err := e.m.Decompose(ctx, other.ID, 0); err != nil {
					t.Fatal(err)
				}
				e.compose(specific("host3", "gpu2"))
			}
			id, version := c.ID, c.Version
			if tt.id != "" {
				id = tt.id
			}
			if tt.stale {
				version--
			}
			var got *inventory.Composition
			var err error
			got, err = e.m.Update(ctx, id, compose.UpdateRequest{Version: version, Blocks: tt.add.Blocks, Needs: tt.add.Needs,
				Remove: tt.remove, Set: tt.set})
			if tt.wantErr != nil || tt.unsatisfied {
				var u *schedule.Unsatisfiable
				switch {
				case err == nil:
					t.Fatalf("update succeeded with %s, want an error", compose.Describe(got))
				case tt.unsatisfied && !errors.As(err, &u):
					t.Fatalf("update: %v, want *schedule.Unsatisfiable", err)
				case tt.wantErr != nil && !errors.Is(err, tt.wantErr):
					t.Fatalf("update: %v, want %v", err, tt.wantErr)
				}
				if now, err := e.m.Get(c.ID); err != nil || summary(now) != summary(c) {
					t.Errorf("after a refused update Get = %v, %v; want %s unchanged", now, err, summary(c))
				}
				e.checkConsistent()
				return
			}
			if err != nil {
				t.Fatalf("update: %v", err)
			}
			if got.State != inventory.Composed {
				t.Errorf("state %s, want Composed", got.State)
			}
			if tt.want != nil && !slices.Equal(got.Blocks, tt.want) {
				t.Errorf("blocks %v, want %v", got.Blocks, tt.want)
			}
			if tt.kinds != nil {
				if k := blocksOfKind(top, got); !mapsEqual(k, tt.kinds) {
					t.Errorf("blocks by kind %v, want %v", k, tt.kinds)
				}
				if !slices.Equal(got.Blocks[:len(base)], base) {
					t.Errorf("blocks %v do not keep %v first", got.Blocks, base)
				}
			}
			changed := !slices.Equal(got.Blocks, c.Blocks)
			if changed && got.Version <= c.Version || !changed && got.Version != c.Version {
				t.Errorf("version %d after update from %d (changed %v)", got.Version, c.Version, changed)
			}
			if now, err := e.m.Get(c.ID); err != nil || summary(now) != summary(got) {
				t.Errorf("Get = %v, %v; want %s", now, err, summary(got))
			}
			for _, b := range c.Blocks {
				if !slices.Contains(got.Blocks, b) {
					if st := e.m.BlockStatus(b); st.State != "Unused" {
						t.Errorf("removed block %s is %s in %v, want Unused", b, st.State, st.Compositions)
					}
				}
			}
			for _, b := range got.Blocks {
				if st := e.m.BlockStatus(b); st.State != "Composed" || !slices.Equal(st.Compositions, []string{c.ID}) {
					t.Errorf("block %s is %s in %v, want Composed in [%s]", b, st.State, st.Compositions, c.ID)
				}
			}
			for b := range got.Ports {
				if !slices.Contains(got.Blocks, b) {
					t.Errorf("ports %v name %s, which the composition no longer holds", got.Ports, b)
				}
			}
			e.checkConsistent()
		})
	}
}

func TestShareableBlock(t *testing.T) {
	e := newEnv(t, loadRack(t))
	if st := e.m.BlockStatus("nic1"); st.State != "Unused" {
		t.Fatalf("nic1 is %s before any compose", st.State)
	}
	a := e.compose(specific("host1", "nic1", "gpu1"))
	b := e.compose(specific("host2", "nic1"))
	st := e.m.BlockStatus("nic1")
	if st.State != "ComposedAndAvailable" || !slices.Equal(slices.Sorted(slices.Values(st.Compositions)), slices.Sorted(slices.Values([]string{a.ID, b.ID}))) {
		t.Errorf("nic1 is %s in %v, want ComposedAndAvailable in %s and %s", st.State, st.Compositions, a.ID, b.ID)
	}
	if st := e.m.BlockStatus("gpu1"); st.State != "Composed" {
		t.Errorf("exclusive gpu1 is %s, want Composed", st.State)
	}
	e.checkConsistent()
	want := []string{"falcon1: gpu1 -> host1/pcie", "falcon1: nic1 -> host1/pcie", "falcon1: nic1 -> host2/pcie"}
	if got := discovered(t, e.drivers); !slices.Equal(got, want) {
		t.Errorf("attachments %q, want %q", got, want)
	}
	// A third through an update.
	c := e.compose(specific("host3", "gpu3"))
	if _, err := e.m.Update(ctx, c.ID, compose.UpdateRequest{Blocks: []string{"nic1"}}); err != nil {
		t.Fatalf("add the shared nic: %v", err)
	}
	if st := e.m.BlockStatus("nic1"); st.State != "ComposedAndAvailable" || len(st.Compositions) != 3 {
		t.Errorf("nic1 is %s in %v, want ComposedAndAvailable in 3", st.State, st.Compositions)
	}
	if err := e.m.Decompose(ctx, a.ID, 0); err != nil {
		t.Fatal(err)
	}
	if st := e.m.BlockStatus("nic1"); st.State != "ComposedAndAvailable" || len(st.Compositions) != 2 {
		t.Errorf("nic1 is %s in %v after one decompose, want ComposedAndAvailable in 2", st.State, st.Compositions)
	}
	e.checkConsistent()
	for _, id := range []string{b.ID, c.ID} {
		if err := e.m.Decompose(ctx, id, 0); err != nil {
			t.Fatal(err)
		}
	}
	e.checkEmpty()
}

// TestUpdateAddAndRemoveSameBlock: removing a shareable block and adding it
// back in one update must not leave the composition claiming a block the
// fabric no longer attaches.
func TestUpdateAddAndRemoveSameBlock(t *testing.T) {
	e := newEnv(t, loadRack(t))
	c := e.compose(specific("host1", "nic1", "gpu1"))
	got, err := e.m.Update(ctx, c.ID, compose.UpdateRequest{Blocks: []string{"nic1"}, Remove: []string{"nic1"}})
	if err == nil {
		if slices.Contains(got.Blocks, "nic1") {
			if n := e.m.BlockStatus("nic1").Compositions; len(n) != 1 {
				t.Errorf("nic1 held %d times by %v, want once", len(n), n)
			}
		}
	} else if !errors.Is(err, compose.ErrBadRequest) {
		t.Errorf("update: %v, want success or ErrBadRequest", err)
	}
	e.checkConsistent()
}

// TestComposeAllOrNothing fails one attach of a compose that spans every
// fabric: the compose must fail with ErrAttach and leave nothing behind,
// and the same request must succeed once the fault is gone.
func TestComposeAllOrNothing(t *testing.T) {
	top := loadRack(t)
	req := specific("host1", "gpu1", "gpu2", "hdd1", "hdd2", "memnode1-b01", "memnode1-b02", "essd1", "essd2")
	for _, fid := range []string{"falcon1", "sas1", "ocs1", "vlan1"} {
		t.Run(fid, func(t *testing.T) {
			e := newEnv(t, top)
			keep := e.compose(specific("host2", "gpu5", "hdd9"))
			before := discovered(t, e.drivers)
			e.faulty[fid].FailNthAttach(2)
			_, err := e.m.Compose(ctx, req)
			if !errors.Is(err, compose.ErrAttach) || !errors.Is(err, fabric.ErrInjected) {
				t.Fatalf("compose: %v, want ErrAttach wrapping the injected fault", err)
			}
			// The first attach on the failing fabric succeeded, so the
			// rollback had something to detach.
			if !detachedAfterAttach(e.faulty[fid].Calls()) {
				t.Errorf("%s: no detach of the block attached before the failure: %+v", fid, e.faulty[fid].Calls())
			}
			if l := e.m.List(); len(l) != 1 || l[0].ID != keep.ID {
				t.Errorf("list %q, want only %s", summaries(l), keep.ID)
			}
			if got := discovered(t, e.drivers); !slices.Equal(got, before) {
				t.Errorf("attachments after the failed compose %q, want %q", got, before)
			}
			for _, b := range req.Blocks {
				if st := e.m.BlockStatus(b); st.State != "Unused" {
					t.Errorf("block %s is %s in %v, want Unused", b, st.State, st.Compositions)
				}
			}
			e.checkConsistent()
			c, err := e.m.Compose(ctx, req)
			if err != nil {
				t.Fatalf("compose after the fault: %v", err)
			}
			if want := append([]string{"host1"}, req.Blocks...); !slices.Equal(c.Blocks, want) {
				t.Errorf("blocks %v, want %v", c.Blocks, want)
			}
			e.checkConsistent()
		})
	}
}

// detachedAfterAttach reports whether a block attached successfully was
// detached later.
func detachedAfterAttach(calls []faulty.Call) bool {
	attached := map[string]bool{}
	for _, c := range calls {
		switch {
		case c.Op == faulty.OpAttach && c.Err == nil:
			attached[c.Attachment.Block] = true
		case c.Op == faulty.OpDetach && c.Err == nil && attached[c.Attachment.Block]:
			return true
		}
	}
	return false
}

// TestUpdateAllOrNothing fails an added block's attach, and then a removed
// block's detach: each update must fail and leave the composition holding
// its previous blocks, Composed, with the fabrics as before.
func TestUpdateAllOrNothing(t *testing.T) {
	top := loadRack(t)
	tests := []struct {
		name   string
		fabric string
		arm    func(*faulty.Driver)
		want   error
	}{
		{"second attach fails", "falcon1", func(d *faulty.Driver) { d.FailNthAttach(2) }, compose.ErrAttach},
		{"memory attach fails", "ocs1", func(d *faulty.Driver) { d.FailNthAttach(1) }, compose.ErrAttach},
		{"removal detach fails", "sas1", func(d *faulty.Driver) { d.FailNextDetaches(1) }, compose.ErrDetach},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, top)
			c := e.compose(specific("host1", "gpu1", "hdd1", "memnode1-b01"))
			before := discovered(t, e.drivers)
			tt.arm(e.faulty[tt.fabric])
			add := compose.UpdateRequest{Version: c.Version, Blocks: []string{"gpu2", "gpu3", "essd1", "memnode1-b02", "memnode1-b03"}, Remove: []string{"hdd1"}}
			_, err := e.m.Update(ctx, c.ID, add)
			if !errors.Is(err, tt.want) || !errors.Is(err, fabric.ErrInjected) {
				t.Fatalf("update: %v, want %v wrapping the injected fault", err, tt.want)
			}
			now, err := e.m.Get(c.ID)
			if err != nil {
				t.Fatal(err)
			}
			if now.State != inventory.Composed || !slices.Equal(now.Blocks, c.Blocks) || len(now.Adding)+len(now.Removing) != 0 ||
				now.Version < c.Version || !mapsEqual(now.Ports, c.Ports) {
				t.Errorf("after the failed update: %s, want %s (version may grow)", summary(now), summary(c))
			}
			if got := discovered(t, e.drivers); !slices.Equal(got, before) {
				t.Errorf("attachments after the failed update %q, want %q", got, before)
			}
			for _, b := range add.Blocks {
				if st := e.m.BlockStatus(b); st.State != "Unused" {
					t.Errorf("block %s is %s in %v, want Unused", b, st.State, st.Compositions)
				}
			}
			if st := e.m.BlockStatus("hdd1"); st.State != "Composed" {
				t.Errorf("hdd1 is %s, want Composed", st.State)
			}
			e.checkConsistent()
			add.Version = now.Version
			got, err := e.m.Update(ctx, c.ID, add)
			if err != nil {
				t.Fatalf("update after the fault: %v", err)
			}
			if want := []string{"host1", "gpu1", "memnode1-b01", "gpu2", "gpu3", "essd1", "memnode1-b02", "memnode1-b03"}; !slices.Equal(got.Blocks, want) {
				t.Errorf("blocks %v, want %v", got.Blocks, want)
			}
			e.checkConsistent()
		})
	}
}

// TestDecomposeDetachFails: a failed detach leaves the composition
// Decomposing (busy for updates); decomposing it again finishes the job,
// and a third time finds nothing.
func TestDecomposeDetachFails(t *testing.T) {
	e := newEnv(t, loadRack(t))
	c := e.compose(specific("host1", "gpu1", "hdd1"))
	e.faulty["sas1"].FailNextDetaches(1)
	if err := e.m.Decompose(ctx, c.ID, c.Version); !errors.Is(err, compose.ErrDetach) {
		t.Fatalf("decompose: %v, want ErrDetach", err)
	}
	now, err := e.m.Get(c.ID)
	if err != nil || now.State != inventory.Decomposing {
		t.Fatalf("after a failed detach Get = %v, %v; want Decomposing", now, err)
	}
	e.checkStore()
	if _, err := e.m.Update(ctx, c.ID, compose.UpdateRequest{Blocks: []string{"gpu2"}}); !errors.Is(err, compose.ErrBusy) {
		t.Errorf("update of a decomposing composition: %v, want ErrBusy", err)
	}
	var u *schedule.Unsatisfiable
	if _, err := e.m.Compose(ctx, specific("host2", "hdd1")); !errors.As(err, &u) {
		t.Errorf("compose of a block still being decomposed: %v, want *schedule.Unsatisfiable", err)
	}
	if err := e.m.Decompose(ctx, c.ID, 0); err != nil {
		t.Fatalf("retry decompose: %v", err)
	}
	if err := e.m.Decompose(ctx, c.ID, 0); !errors.Is(err, compose.ErrNotFound) {
		t.Errorf("third decompose: %v, want ErrNotFound", err)
	}
	e.checkEmpty()
}

// TestComposeRollbackDetachFails: when the rollback of a failed compose
// cannot detach, the record stays in the store for recovery; a restart
// must clean it up.
func TestComposeRollbackDetachFails(t *testing.T) {
	e := newEnv(t, loadRack(t))
	e.faulty["falcon1"].FailNthAttach(2)
	e.faulty["falcon1"].FailNextDetaches(1)
	if _, err := e.m.Compose(ctx, specific("host1", "gpu1", "gpu2")); !errors.Is(err, compose.ErrAttach) {
		t.Fatalf("compose: %v, want ErrAttach", err)
	}
	e.m = e.manager(e.drivers)
	e.checkEmpty()
}

// TestUpdateAfterRestartWithoutDevices: a composition holding only its
// compute block may come back from the store with nil Ports (an empty map
// does not survive every encoding); adding a block to it must work, not
// panic with m.mu held.
func TestUpdateAfterRestartWithoutDevices(t *testing.T) {
	e := newEnv(t, loadRack(t))
	c := e.compose(specific("host1"))
	e.m = e.manager(e.drivers)
	got, err := e.m.Update(ctx, c.ID, compose.UpdateRequest{Blocks: []string{"gpu1"}})
	if err != nil {
		t.Fatalf("update: %v", err)
	}
	if want := []string{"host1", "gpu1"}; !slices.Equal(got.Blocks, want) {
		t.Errorf("blocks %v, want %v", got.Blocks, want)
	}
	e.checkConsistent()
}

// TestUpdateNeedsSkipHeldBlocks: blocks placed for an update's needs must
// be new to the composition. A shareable NIC the composition already
// holds (or is removing) has room for more compositions, but not for this
// one twice.
func TestUpdateNeedsSkipHeldBlocks(t *testing.T) {
	top := loadRack(t)
	for _, remove := range [][]string{nil, {"nic1"}} {
		t.Run(fmt.Sprintf("remove %v", remove), func(t *testing.T) {
			e := newEnv(t, top)
			c := e.compose(specific("host1", "nic1"))
			got, err := e.m.Update(ctx, c.ID, compose.UpdateRequest{Needs: []schedule.Need{{Kind: inventory.NIC, Count: 1}}, Remove: remove})
			var u *schedule.Unsatisfiable
			switch {
			case errors.As(err, &u):
				// host1 reaches only nic1: acceptable.
			case err != nil:
				t.Fatalf("update: %v", err)
			case len(slices.Compact(slices.Sorted(slices.Values(got.Blocks)))) != len(got.Blocks):
				t.Errorf("update placed a block the composition holds: %v", got.Blocks)
			}
			if st := e.m.BlockStatus("nic1"); len(st.Compositions) > 1 {
				t.Errorf("nic1 is held %d times: %v", len(st.Compositions), st.Compositions)
			}
			e.checkConsistent()
		})
	}
}

// TestComposeAfterFailedRollback: when a failed compose cannot detach what
// it attached, the blocks it holds are still attached and still recorded
// in the store until a restart recovers them. Meanwhile the manager must
// not offer them as free: BlockStatus must not say Unused for an attached
// block, and a compose asking for them must fail with a documented error
// (Unsatisfiable), not a store conflict.
func TestComposeAfterFailedRollback(t *testing.T) {
	e := newEnv(t, loadRack(t))
	e.faulty["falcon1"].FailNthAttach(2)
	e.faulty["falcon1"].FailNextDetaches(1)
	if _, err := e.m.Compose(ctx, specific("host1", "gpu1", "gpu2")); !errors.Is(err, compose.ErrAttach) {
		t.Fatalf("compose: %v, want ErrAttach", err)
	}
	if got := discovered(t, e.drivers); !slices.Contains(got, "falcon1: gpu1 -> host1/pcie") {
		t.Fatalf("the failed rollback detached gpu1 after all (%q): the scenario needs it attached", got)
	}
	if st := e.m.BlockStatus("gpu1"); st.State == "Unused" {
		t.Errorf("gpu1 is attached to host1 but BlockStatus says Unused")
	}
	_, err := e.m.Compose(ctx, specific("host1", "gpu3"))
	var u *schedule.Unsatisfiable
	if err == nil || !errors.As(err, &u) {
		t.Errorf("compose on host1 while the failed composition still holds it: %v, want *schedule.Unsatisfiable", err)
	}
	e.m = e.manager(e.drivers)
	e.checkEmpty()
}

// TestUpdateAfterFailedRollback: when an update's attach fails and the
// rollback cannot detach the additions already attached, those blocks are
// still attached to the host. The manager must not give them to another
// composition (whose attach would then fail), and a restart must leave
// the fabrics matching the compositions.
func TestUpdateAfterFailedRollback(t *testing.T) {
	e := newEnv(t, loadRack(t))
	c := e.compose(specific("host1", "hdd1"))
	e.faulty["falcon1"].FailNthAttach(2)
	e.faulty["falcon1"].FailNextDetaches(1)
	if _, err := e.m.Update(ctx, c.ID, compose.UpdateRequest{Blocks: []string{"gpu2", "gpu3"}}); !errors.Is(err, compose.ErrAttach) {
		t.Fatalf("update: %v, want ErrAttach", err)
	}
	if got := discovered(t, e.drivers); !slices.Contains(got, "falcon1: gpu2 -> host1/pcie") {
		t.Fatalf("the failed rollback detached gpu2 after all (%q): the scenario needs it attached", got)
	}
	if st := e.m.BlockStatus("gpu2"); st.State == "Unused" {
		t.Errorf("gpu2 is attached to host1 but BlockStatus says Unused")
	}
	if _, err := e.m.Compose(ctx, specific("host2", "gpu2")); errors.Is(err, compose.ErrAttach) {
		t.Errorf("compose of gpu2 on host2 reached the fabric: %v", err)
	}
	e.m = e.manager(e.drivers)
	e.checkConsistent()
	if got, err := e.m.Get(c.ID); err != nil || !slices.Equal(got.Blocks, c.Blocks) {
		t.Errorf("after restart Get = %v, %v; want blocks %v", got, err, c.Blocks)
	}
}
