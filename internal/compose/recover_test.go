package compose_test

import (
	"slices"
	"testing"

	"rackpool/internal/compose"
	"rackpool/internal/inventory"
)

// TestRecover crafts store records in every transitional state, as a crash
// would leave them, with some of their blocks attached, and starts a
// manager over the same store and drivers: nothing may stay in transition,
// Composing and Decomposing records must be gone with their attachments,
// an Updating one must be back to its previous blocks, and a Composed one
// must be untouched. A second start over fresh drivers must restore the
// Composed ones into the fabrics.
func TestRecover(t *testing.T) {
	top := loadRack(t)
	e := newEnv(t, top)
	// Composed normally, before the "crash".
	kept := e.compose(specific("host1", "gpu1", "nic1", "hdd1", "memnode1-b01"))

	at := e.clk.Now()
	ports := map[string]string{}
	for _, b := range top.Blocks {
		if b.Device != nil {
			ports[b.ID] = map[string]string{"falcon1": "pcie", "sas1": "sas", "ocs1": "ocs-a", "vlan1": "eth"}[b.Device.Fabric.ID]
		}
	}
	craft := func(id, host string, state inventory.State, blocks, adding, removing []string) *inventory.Composition {
		c := &inventory.Composition{ID: id, Name: id, Host: host, State: state, Version: 1, CreatedAt: at, UpdatedAt: at,
			Blocks: append([]string{host}, blocks...), Adding: adding, Removing: removing, Ports: map[string]string{}}
		for _, b := range c.AllBlocks() {
			if p := ports[b]; p != "" {
				c.Ports[b] = p
			}
		}
		return c
	}
	// Composing, crashed after attaching two of four blocks.
	composing := craft("sys-composing", "host2", inventory.Composing, []string{"gpu5", "nic1", "hdd2", "essd1"}, nil, nil)
	// Decomposing, crashed after detaching one of three.
	decomposing := craft("sys-decomposing", "host3", inventory.Decomposing, []string{"gpu3", "ssd1", "memnode2-b01"}, nil, nil)
	// Updating, crashed after attaching one addition and detaching the
	// removal.
	updating := craft("sys-updating", "host4", inventory.Updating, []string{"nvme3", "hdd5", "essd2"}, []string{"hdd6", "fpga2"}, []string{"nvme3"})
	e.put(composing, decomposing, updating)
	e.attach(e.drivers, composing, "gpu5", "nic1")
	e.attach(e.drivers, decomposing, "gpu3", "memnode2-b01")
	e.attach(e.drivers, updating, "hdd5", "essd2", "hdd6")

	wantUpdated := []string{"host4", "nvme3", "hdd5", "essd2"}
	check := func(t *testing.T) {
		t.Helper()
		list := e.m.List()
		var ids []string
		for _, c := range list {
			ids = append(ids, c.ID)
			if c.State != inventory.Composed || len(c.Adding)+len(c.Removing) != 0 {
				t.Errorf("%s is still in transition: %s", c.ID, summary(c))
			}
		}
		slices.Sort(ids)
		if want := []string{kept.ID, "sys-updating"}; !slices.Equal(ids, want) {
			t.Fatalf("compositions %v, want %v", ids, want)
		}
		k, _ := e.m.Get(kept.ID)
		if !slices.Equal(k.Blocks, kept.Blocks) || k.Version != kept.Version {
			t.Errorf("composed %s changed: %s, was %s", kept.ID, summary(k), summary(kept))
		}
		u, _ := e.m.Get("sys-updating")
		if !slices.Equal(u.Blocks, wantUpdated) {
			t.Errorf("updating composition came back with %v, want its old blocks %v", u.Blocks, wantUpdated)
		}
		if _, ok := u.Ports["hdd6"]; ok {
			t.Errorf("rolled-back addition hdd6 still has a port: %v", u.Ports)
		}
		for _, b := range []string{"gpu5", "hdd2", "essd1", "gpu3", "ssd1", "memnode2-b01", "hdd6", "fpga2"} {
			if st := e.m.BlockStatus(b); st.State != "Unused" {
				t.Errorf("block %s is %s in %v, want Unused", b, st.State, st.Compositions)
			}
		}
		if st := e.m.BlockStatus("nic1"); st.State != "ComposedAndAvailable" || !slices.Equal(st.Compositions, []string{kept.ID}) {
			t.Errorf("nic1 is %s in %v, want ComposedAndAvailable in [%s]", st.State, st.Compositions, kept.ID)
		}
		e.checkConsistent()
	}

	t.Run("same drivers", func(t *testing.T) {
		e.t = t
		e.m = e.manager(e.drivers)
		check(t)
	})
	t.Run("fresh drivers", func(t *testing.T) {
		e.t = t
		e.faulty, e.drivers = e.freshDrivers()
		e.m = e.manager(e.drivers)
		check(t)
	})
	t.Run("recovered manager works", func(t *testing.T) {
		e.t = t
		c := e.compose(specific("host2", "gpu5", "hdd2", "memnode2-b01"))
		if _, err := e.m.Update(ctx, "sys-updating", compose.UpdateRequest{Blocks: []string{"hdd6"}, Remove: []string{"nvme3"}}); err != nil {
			t.Fatalf("update the recovered composition: %v", err)
		}
		e.checkConsistent()
		for _, id := range []string{c.ID, kept.ID, "sys-updating"} {
			if err := e.m.Decompose(ctx, id, 0); err != nil {
				t.Fatalf("decompose %s: %v", id, err)
			}
		}
		e.checkEmpty()
	})
}

// TestRecoverDecomposeAfterFailedDetach: a composition left Decomposing by
// a failed detach is rolled back by the next start.
func TestRecoverDecomposeAfterFailedDetach(t *testing.T) {
	e := newEnv(t, loadRack(t))
	c := e.compose(specific("host1", "gpu1", "hdd1", "memnode1-b01"))
	e.faulty["ocs1"].FailNextDetaches(1)
	if err := e.m.Decompose(ctx, c.ID, 0); err == nil {
		t.Fatal("decompose succeeded despite the failed detach")
	}
	e.m = e.manager(e.drivers)
	e.checkEmpty()
}

// TestRecoverOpticalPorts restores a composition whose memory blocks use
// both of a host's optical ports (one circuit to each memory node): after
// a restart over fresh drivers each block must be back on the port the
// scheduler chose.
func TestRecoverOpticalPorts(t *testing.T) {
	e := newEnv(t, loadRack(t))
	c := e.compose(specific("host1", "memnode1-b01"))
	c, err := e.m.Update(ctx, c.ID, compose.UpdateRequest{Blocks: []string{"memnode2-b01"}})
	if err != nil {
		t.Fatalf("add a block of the second memory node: %v", err)
	}
	if c.Ports["memnode1-b01"] == c.Ports["memnode2-b01"] {
		t.Fatalf("both memory nodes on port %s", c.Ports["memnode1-b01"])
	}
	e.checkConsistent()
	e.faulty, e.drivers = e.freshDrivers()
	e.m = e.manager(e.drivers)
	if got, err := e.m.Get(c.ID); err != nil || !mapsEqual(got.Ports, c.Ports) {
		t.Errorf("after restart Get = %v, %v; want ports %v", got, err, c.Ports)
	}
	e.checkConsistent()
}

// TestRecoverLostIntent: a power failure may lose an intent record that
// was acknowledged before it reached the disk (store.Plan.Intent) while the
// fabric kept what its workflow attached. The next start must detach those
// attachments and leave every held one alone.
func TestRecoverLostIntent(t *testing.T) {
	top := loadRack(t)
	e := newEnv(t, top)
	kept := e.compose(specific("host1", "gpu1", "nic1", "hdd1", "memnode1-b01"))
	// What a lost Composing record of host2 had attached: a GPU, the
	// shared NIC kept's composition also holds, a drive and a memory block.
	lost := &inventory.Composition{ID: "sys-lost", Host: "host2", Ports: map[string]string{
		"gpu5": "pcie", "nic1": "pcie", "hdd2": "sas", "memnode2-b01": "ocs-a"}}
	e.attach(e.drivers, lost, "gpu5", "nic1", "hdd2", "memnode2-b01")

	e.m = e.manager(e.drivers)
	checkFabrics(t, top, e.drivers, []*inventory.Composition{kept})
	for _, b := range []string{"gpu5", "hdd2", "memnode2-b01"} {
		if st := e.m.BlockStatus(b); st.State != "Unused" {
			t.Errorf("block %s is %s, want Unused", b, st.State)
		}
	}
	// The blocks are usable again.
	c := e.compose(specific("host2", "gpu5", "hdd2", "memnode2-b01"))
	e.checkConsistent()
	for _, id := range []string{c.ID, kept.ID} {
		if err := e.m.Decompose(ctx, id, 0); err != nil {
			t.Fatalf("decompose %s: %v", id, err)
		}
	}
	e.checkEmpty()
}
