package compose_test

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"rackpool/internal/compose"
	"rackpool/internal/fabric"
	"rackpool/internal/inventory"
	"rackpool/internal/schedule"
	"rackpool/internal/topology"
	"rackpool/internal/units"
)

// seedEnv overrides TestConcurrentModel's random seed, to replay a failure.
const seedEnv = "COMPOSE_MODEL_SEED"

// refModel is the reference the concurrent test checks the manager
// against: for every composition a successful operation returned, its
// latest version and block set. Decomposed IDs are tombstoned, so a late
// report of an earlier success cannot resurrect them.
type refModel struct {
	mu   sync.Mutex
	live map[string]refEntry
	gone map[string]bool
}

type refEntry struct {
	version int64
	blocks  []string // sorted
}

func (r *refModel) put(c *inventory.Composition) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.gone[c.ID] {
		return
	}
	if old, ok := r.live[c.ID]; ok && old.version >= c.Version {
		return // a later success was recorded first
	}
	r.live[c.ID] = refEntry{version: c.Version, blocks: slices.Sorted(slices.Values(c.Blocks))}
}

func (r *refModel) del(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.live, id)
	r.gone[id] = true
}

// pick returns a random live ID, or "" when there is none.
func (r *refModel) pick(rng *rand.Rand) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.live) == 0 {
		return ""
	}
	ids := make([]string, 0, len(r.live))
	for id := range r.live {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids[rng.IntN(len(ids))]
}

func (r *refModel) lines() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for id, e := range r.live {
		out = append(out, fmt.Sprintf("%s %v", id, e.blocks))
	}
	slices.Sort(out)
	return out
}

func listLines(cs []*inventory.Composition) []string {
	var out []string
	for _, c := range cs {
		out = append(out, fmt.Sprintf("%s %v", c.ID, slices.Sorted(slices.Values(c.Blocks))))
	}
	slices.Sort(out)
	return out
}

// TestConcurrentModel runs random compose, update, set-blocks and
// decompose operations from several goroutines against one manager whose
// fabrics fail about one attach in ten, and checks the manager against a
// reference model: no block is ever in more compositions than it allows,
// and at the end the manager, the store, the fabrics and a recovered
// manager all agree with the model exactly.
func TestConcurrentModel(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv(seedEnv); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", seedEnv, s, err)
		}
		seed = v
	}
	t.Logf("seed %d (replay with %s=%d)", seed, seedEnv, seed)
	workers, ops := 8, 150
	if testing.Short() {
		ops = 40
	}
	t.Run("example-rack", func(t *testing.T) {
		// 4 hosts and drawer, optical-port and sharing limits: heavy
		// contention on few compositions.
		runModel(t, loadRack(t), seed, workers, ops)
	})
	t.Run("generated-4-racks", func(t *testing.T) {
		// 16 hosts: many compositions live at once.
		top, err := topology.Parse("generated", topology.GenerateRacks(4))
		if err != nil {
			t.Fatal(err)
		}
		runModel(t, top, seed, workers, ops)
	})
}

func runModel(t *testing.T, top *topology.Topology, seed uint64, workers, ops int) {
	e := newEnv(t, top)
	fids := slices.Sorted(maps.Keys(e.faulty))
	for i, fid := range fids {
		e.faulty[fid].FailAttachesWithProbability(0.1, rand.New(rand.NewPCG(seed, uint64(1000+i))))
	}
	ref := &refModel{live: map[string]refEntry{}, gone: map[string]bool{}}
	var devices []*inventory.Block
	for _, b := range top.Blocks {
		if b.Device != nil {
			devices = append(devices, b)
		}
	}
	w := &modelWorker{t: t, top: top, m: e.m, ref: ref, devices: devices, held: map[string][]string{}}
	for _, b := range devices {
		if b.Kind == inventory.Memory {
			w.memory = append(w.memory, b.ID)
		}
	}

	done := make(chan struct{})
	checked := make(chan int)
	go func() {
		rng := rand.New(rand.NewPCG(seed, 999))
		n := 0
		defer func() { checked <- n }()
		for {
			w.checkInvariants(rng)
			n++
			select {
			case <-done:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	var wg sync.WaitGroup
	stats := make([]map[string]int, workers)
	for g := range workers {
		stats[g] = map[string]int{}
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(g)))
			for range ops {
				stats[g][w.step(rng, g)]++
			}
		})
	}
	wg.Wait()
	close(done)
	t.Logf("invariant checks while running: %d", <-checked)
	total := map[string]int{}
	for _, s := range stats {
		for k, v := range s {
			total[k] += v
		}
	}
	t.Logf("outcomes: %v", total)
	// A manifest composes several systems at once: on the four hosts of
	// the example rack, usually full, one may never fit.
	manifestOK := total["manifest ok"] > 0 || len(top.Hosts) < 8
	// Injected attach failures strike whichever workflow attaches: on the
	// small rack, where most composes are unsatisfiable, a run may see
	// them only in updates, sets or manifests.
	attachFailed := 0
	for k, v := range total {
		if strings.HasSuffix(k, " ErrAttach") {
			attachFailed += v
		}
	}
	if total["compose ok"] == 0 || total["update ok"] == 0 || total["set ok"] == 0 || total["decompose ok"] == 0 || attachFailed == 0 ||
		!manifestOK || total["hold ok"] == 0 {
		t.Errorf("the run did not exercise every workflow: %v", total)
	}
	if t.Failed() {
		return
	}

	// The end state.
	w.checkInvariants(rand.New(rand.NewPCG(seed, 998)))
	list := e.m.List()
	if got, want := listLines(list), ref.lines(); !slices.Equal(got, want) {
		t.Errorf("manager differs from the model\nmanager: %q\nmodel:   %q", got, want)
	}
	e.checkConsistent()

	// A restart over fresh drivers recovers the same compositions and
	// restores their attachments.
	e2 := *e
	e2.faulty, e2.drivers = e.freshDrivers()
	e2.m = e2.manager(e2.drivers)
	if got, want := summaries(e2.m.List()), summaries(list); !slices.Equal(got, want) {
		t.Errorf("recovered manager differs\nrecovered: %q\noriginal:  %q", got, want)
	}
	for holder, blocks := range w.held {
		if got := e2.m.Held(holder); !slices.Equal(got, blocks) {
			t.Errorf("recovered holder %s holds %v, want %v", holder, got, blocks)
		}
	}
	e2.checkConsistent()

	// Decompose everything through the original manager, faults off.
	for _, fid := range fids {
		e.faulty[fid].Reset()
	}
	for _, c := range list {
		if err := e.m.Decompose(ctx, c.ID, c.Version); err != nil {
			t.Errorf("decompose %s: %v", c.ID, err)
		}
	}
	for holder := range w.held {
		if err := e.m.SetHeld(ctx, holder, "model", nil, nil); err != nil {
			t.Errorf("release holder %s: %v", holder, err)
		}
	}
	e.checkEmpty()
}

// modelWorker performs random operations; its methods are safe for
// concurrent use (each goroutine passes its own rng).
type modelWorker struct {
	t       *testing.T
	top     *topology.Topology
	m       *compose.Manager
	ref     *refModel
	devices []*inventory.Block
	memory  []string // memory blocks, for holders

	mu   sync.Mutex
	held map[string][]string // holder (one per worker) → blocks it holds, sorted
}

var modelKinds = []inventory.Kind{inventory.GPU, inventory.NVMe, inventory.HDD, inventory.SSD, inventory.Memory, inventory.NIC}

func (w *modelWorker) randomHost(rng *rand.Rand) string {
	return w.top.Hosts[rng.IntN(len(w.top.Hosts))].ID
}

func (w *modelWorker) randomNeeds(rng *rand.Rand, max int) []schedule.Need {
	var needs []schedule.Need
	for _, k := range rng.Perm(len(modelKinds))[:1+rng.IntN(max)] {
		n := schedule.Need{Kind: modelKinds[k], Count: 1 + rng.IntN(3)}
		if n.Kind == inventory.Memory && rng.IntN(2) == 0 {
			n.Count, n.CapacityBytes = 0, int64(1+rng.IntN(3))*8*units.GiB
		}
		needs = append(needs, n)
	}
	return needs
}

// randomDevices returns up to n distinct random device blocks that host
// reaches and that are not in except; one in ten may be any block at all.
func (w *modelWorker) randomDevices(rng *rand.Rand, n int, host string, except []string) []string {
	h := w.top.Host(host)
	var out []string
	for range 20 * n {
		if len(out) == n {
			break
		}
		b := w.devices[rng.IntN(len(w.devices))]
		if _, ok := w.top.Path(h, b); !ok && rng.IntN(10) > 0 {
			continue
		}
		if !slices.Contains(out, b.ID) && !slices.Contains(except, b.ID) {
			out = append(out, b.ID)
		}
	}
	return out
}

// step performs one random operation for worker g and returns its
// outcome's name.
func (w *modelWorker) step(rng *rand.Rand, g int) string {
	p := rng.IntN(100)
	if p >= 40 && w.ref.pick(rng) == "" {
		p = 0 // nothing to update or decompose: compose instead
	}
	switch {
	case p < 25:
		req := compose.Request{Needs: w.randomNeeds(rng, 3)}
		if rng.IntN(2) == 0 {
			req.Host = w.randomHost(rng)
		}
		if rng.IntN(5) == 0 {
			return w.placeCancel(req)
		}
		return w.compose(req)
	case p < 40:
		host := w.randomHost(rng)
		req := compose.Request{Blocks: w.randomDevices(rng, 1+rng.IntN(3), host, nil)}
		if rng.IntN(3) > 0 {
			req.Host = host
		}
		return w.compose(req)
	case p < 60:
		return w.update(rng)
	case p < 70:
		return w.setBlocks(rng)
	case p < 75:
		return w.hold(rng, g)
	case p < 82:
		return w.manifest(rng)
	default:
		return w.decompose(rng)
	}
}

// hold makes worker g's holder (as a memory lease manager's per-node
// holder) hold 0 to 2 random memory blocks.
func (w *modelWorker) hold(rng *rand.Rand, g int) string {
	holder := fmt.Sprintf("hold-%d", g)
	var blocks []string
	for range rng.IntN(3) {
		blocks = append(blocks, w.memory[rng.IntN(len(w.memory))])
	}
	blocks = slices.Compact(slices.Sorted(slices.Values(blocks)))
	err := w.m.SetHeld(ctx, holder, "model", blocks, nil)
	if err == nil {
		if got := w.m.Held(holder); !slices.Equal(got, blocks) {
			w.t.Errorf("holder %s holds %v after SetHeld(%v)", holder, got, blocks)
		}
		w.mu.Lock()
		w.held[holder] = blocks
		if len(blocks) == 0 {
			delete(w.held, holder)
		}
		w.mu.Unlock()
	}
	return w.outcome("hold", err, compose.ErrBlockBusy)
}

// manifest composes one or two systems, and sometimes decomposes a live
// one, all or nothing.
func (w *modelWorker) manifest(rng *rand.Rand) string {
	var mf compose.Manifest
	for range 1 + rng.IntN(2) {
		mf.Stanzas = append(mf.Stanzas, compose.Stanza{Compose: &compose.Request{Needs: w.randomNeeds(rng, 1)}})
	}
	victim := ""
	if rng.IntN(2) == 0 {
		victim = w.ref.pick(rng)
		if victim != "" {
			mf.Stanzas = append(mf.Stanzas, compose.Stanza{Decompose: victim})
		}
	}
	got, err := w.m.Apply(ctx, mf)
	if err == nil {
		for _, c := range got {
			w.ref.put(c)
			w.checkComposed("manifest", c)
		}
		if victim != "" {
			w.ref.del(victim)
			if _, err := w.m.Get(victim); !errors.Is(err, compose.ErrNotFound) {
				w.t.Errorf("Get after a manifest decomposed %s: %v, want ErrNotFound", victim, err)
			}
		}
		if want := len(mf.Stanzas) - min(len(victim), 1); len(got) != want {
			w.t.Errorf("manifest of %d compose stanzas returned %d systems", want, len(got))
		}
	}
	return w.outcome("manifest", err, compose.ErrNotFound, compose.ErrBusy, compose.ErrVersion)
}

// outcome classifies err, failing the test on an error the operation must
// never return, and returns the outcome's name.
func (w *modelWorker) outcome(op string, err error, allowed ...error) string {
	if err == nil {
		return op + " ok"
	}
	var u *schedule.Unsatisfiable
	if errors.As(err, &u) {
		return op + " unsatisfiable"
	}
	if errors.Is(err, compose.ErrAttach) {
		// Only the injected faults may fail an attach: anything else means
		// the scheduler's view and the fabric disagree.
		for _, physics := range []error{fabric.ErrInUse, fabric.ErrPortBusy, fabric.ErrDrawerHosts, fabric.ErrUnreachable, fabric.ErrUnknown, fabric.ErrFailed} {
			if errors.Is(err, physics) {
				w.t.Errorf("%s: a fabric refused what the scheduler planned: %v", op, err)
			}
		}
		if !errors.Is(err, fabric.ErrInjected) {
			w.t.Errorf("%s: attach failed without an injected fault: %v", op, err)
		}
		return op + " ErrAttach"
	}
	for _, a := range allowed {
		if errors.Is(err, a) {
			return fmt.Sprintf("%s %v", op, a)
		}
	}
	w.t.Errorf("%s: unexpected error: %v", op, err)
	return op + " unexpected"
}

// checkComposed checks a composition a successful operation returned.
func (w *modelWorker) checkComposed(op string, c *inventory.Composition) {
	if c.State != inventory.Composed || len(c.Adding)+len(c.Removing) != 0 {
		w.t.Errorf("%s returned %s", op, summary(c))
	}
	if len(c.Blocks) == 0 || c.Blocks[0] != c.Host || w.top.Host(c.Host) == nil {
		w.t.Errorf("%s returned blocks %v on host %s", op, c.Blocks, c.Host)
	}
	if len(slices.Compact(slices.Sorted(slices.Values(c.Blocks)))) != len(c.Blocks) {
		w.t.Errorf("%s returned duplicate blocks %v", op, c.Blocks)
	}
}

func (w *modelWorker) compose(req compose.Request) string {
	c, err := w.m.Compose(ctx, req)
	if err == nil {
		w.ref.put(c)
		w.checkComposed("compose", c)
		if req.Host != "" && c.Host != req.Host {
			w.t.Errorf("compose on %s landed on %s", req.Host, c.Host)
		}
		if req.Blocks != nil && !slices.Equal(c.Blocks[1:], req.Blocks) {
			w.t.Errorf("compose of %v got %v", req.Blocks, c.Blocks)
		}
		w.checkNeeds("compose", c, c.Blocks[1:], req.Needs)
	}
	return w.outcome("compose", err)
}

// placeCancel places req and gives the placement back (a client that
// went away between the two halves of a compose): the blocks must be
// free again and nothing recorded, which the model's final check sees.
func (w *modelWorker) placeCancel(req compose.Request) string {
	p, err := w.m.Place(ctx, req)
	if err == nil {
		for _, b := range p.Blocks() {
			if st := w.m.BlockStatus(b); st.State != "Composing" {
				w.t.Errorf("placed block %s is %s, want Composing", b, st.State)
			}
		}
		p.Cancel()
	}
	return w.outcome("place+cancel", err)
}

// checkNeeds checks that added, the blocks placed for needs, are of the
// kinds and counts asked for.
func (w *modelWorker) checkNeeds(op string, c *inventory.Composition, added []string, needs []schedule.Need) {
	got := map[inventory.Kind]int{}
	for _, b := range added {
		got[w.top.Block(b).Kind]++
	}
	for _, n := range needs {
		want := n.Count
		if n.CapacityBytes > 0 {
			want = int(n.CapacityBytes / (8 * units.GiB))
		}
		if got[n.Kind] != want {
			w.t.Errorf("%s %s: %d blocks of %s, want %d (blocks %v)", op, c.ID, got[n.Kind], n.Kind, want, added)
		}
	}
}

func (w *modelWorker) update(rng *rand.Rand) string {
	id := w.ref.pick(rng)
	if id == "" {
		return "update nothing"
	}
	c, err := w.m.Get(id)
	if err != nil {
		return w.outcome("update", err, compose.ErrNotFound)
	}
	var remove, keep []string
	for i, b := range c.Blocks {
		if i > 0 && len(remove) < 2 && rng.IntN(3) == 0 {
			remove = append(remove, b)
		} else {
			keep = append(keep, b)
		}
	}
	var add compose.UpdateRequest
	switch rng.IntN(3) {
	case 0:
		add.Needs = w.randomNeeds(rng, 1)
	case 1:
		add.Blocks = w.randomDevices(rng, 1+rng.IntN(2), c.Host, c.Blocks)
	}
	version := c.Version
	if rng.IntN(5) == 0 {
		version = 0
	}
	add.Version, add.Remove = version, remove
	got, err := w.m.Update(ctx, id, add)
	if err == nil {
		w.ref.put(got)
		w.checkComposed("update", got)
		if version != 0 {
			// It updated exactly the composition read.
			if !slices.Equal(got.Blocks[:min(len(keep), len(got.Blocks))], keep) {
				w.t.Errorf("update of %v removing %v got %v", c.Blocks, remove, got.Blocks)
			} else if add.Blocks != nil && !slices.Equal(got.Blocks[len(keep):], add.Blocks) {
				w.t.Errorf("update of %v adding %v got %v", c.Blocks, add.Blocks, got.Blocks)
			} else if add.Needs != nil {
				w.checkNeeds("update", got, got.Blocks[len(keep):], add.Needs)
			}
		}
	}
	return w.outcome("update", err, compose.ErrNotFound, compose.ErrBusy, compose.ErrVersion, compose.ErrBadRequest)
}

func (w *modelWorker) setBlocks(rng *rand.Rand) string {
	id := w.ref.pick(rng)
	if id == "" {
		return "set nothing"
	}
	c, err := w.m.Get(id)
	if err != nil {
		return w.outcome("set", err, compose.ErrNotFound)
	}
	var want []string
	for i, b := range c.Blocks {
		if i == 0 || rng.IntN(3) > 0 {
			want = append(want, b)
		}
	}
	want = append(want, w.randomDevices(rng, rng.IntN(3), c.Host, c.Blocks)...)
	got, err := w.m.Update(ctx, id, compose.UpdateRequest{Version: c.Version, Set: want})
	if err == nil {
		w.ref.put(got)
		w.checkComposed("set", got)
		if !slices.Equal(slices.Sorted(slices.Values(got.Blocks)), slices.Sorted(slices.Values(want))) {
			w.t.Errorf("set blocks %v of %v got %v", want, c.Blocks, got.Blocks)
		}
	}
	return w.outcome("set", err, compose.ErrNotFound, compose.ErrBusy, compose.ErrVersion, compose.ErrBadRequest)
}

func (w *modelWorker) decompose(rng *rand.Rand) string {
	id := w.ref.pick(rng)
	if id == "" {
		return "decompose nothing"
	}
	var version int64
	if rng.IntN(4) == 0 {
		if c, err := w.m.Get(id); err == nil {
			version = c.Version
		}
	}
	err := w.m.Decompose(ctx, id, version)
	if err == nil {
		w.ref.del(id)
		if _, err := w.m.Get(id); !errors.Is(err, compose.ErrNotFound) {
			w.t.Errorf("Get after decompose of %s: %v, want ErrNotFound", id, err)
		}
	}
	return w.outcome("decompose", err, compose.ErrNotFound, compose.ErrBusy, compose.ErrVersion)
}

// checkInvariants checks one snapshot of the manager: no block in more
// compositions than it allows, no host in two, every composition starting
// with its own compute block; and that BlockStatus of a few random blocks
// is within the block's limit.
func (w *modelWorker) checkInvariants(rng *rand.Rand) {
	holders := map[string][]string{}
	hosts := map[string]string{}
	for _, c := range w.m.List() {
		if prev, ok := hosts[c.Host]; ok {
			w.t.Errorf("host %s in %s and %s", c.Host, prev, c.ID)
		}
		hosts[c.Host] = c.ID
		if len(c.Blocks) == 0 || c.Blocks[0] != c.Host {
			w.t.Errorf("%s: blocks %v do not start with host %s", c.ID, c.Blocks, c.Host)
		}
		for _, b := range c.AllBlocks() {
			if slices.Contains(holders[b], c.ID) {
				w.t.Errorf("%s holds %s twice: %s", c.ID, b, summary(c))
			}
			holders[b] = append(holders[b], c.ID)
		}
	}
	w.mu.Lock()
	for holder, blocks := range w.held {
		for _, b := range blocks {
			if cs := holders[b]; len(cs) > 0 {
				w.t.Errorf("block %s held by %s and in compositions %v", b, holder, cs)
			}
		}
	}
	w.mu.Unlock()
	for id, cs := range holders {
		b := w.top.Block(id)
		if b == nil {
			w.t.Errorf("unknown block %s in %v", id, cs)
			continue
		}
		if limit := max(b.MaxCompositions, 1); len(cs) > limit {
			w.t.Errorf("block %s (limit %d) is in %d compositions: %v", id, limit, len(cs), cs)
		}
	}
	for range 8 {
		b := w.top.Blocks[rng.IntN(len(w.top.Blocks))]
		st := w.m.BlockStatus(b.ID)
		if len(st.Compositions) > max(b.MaxCompositions, 1) {
			w.t.Errorf("BlockStatus(%s) = %s in %v, over its limit %d", b.ID, st.State, st.Compositions, b.MaxCompositions)
		}
		if st.HeldBy != "" {
			if st.State != "Unavailable" || len(st.Compositions) != 0 {
				w.t.Errorf("BlockStatus(%s) = %s in %v, held by %s", b.ID, st.State, st.Compositions, st.HeldBy)
			}
			continue
		}
		if (st.State == "Unused") != (len(st.Compositions) == 0) {
			w.t.Errorf("BlockStatus(%s) = %s in %v", b.ID, st.State, st.Compositions)
		}
	}
}
