package replica_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"rackpool/internal/clock"
	"rackpool/internal/compose"
	"rackpool/internal/fabric"
	"rackpool/internal/fabric/emulated"
	"rackpool/internal/inventory"
	"rackpool/internal/replica"
	"rackpool/internal/replica/alloctest"
	"rackpool/internal/schedule"
	"rackpool/internal/store"
	"rackpool/internal/store/postgres"
	"rackpool/internal/store/postgres/pgtest"
	"rackpool/internal/topology"
)

// node is one replica: its own store connection pool, manager and
// follower, over fabric drivers every replica shares (as they share the
// fabric managers of a real deployment).
type node struct {
	st  *postgres.Store
	mgr *compose.Manager
	f   *replica.Follower
}

func startNode(t *testing.T, ctx context.Context, url string, top *topology.Topology, drivers map[string]fabric.Driver) *node {
	t.Helper()
	st, err := postgres.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	head, err := st.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f := replica.New(st, head, nil)
	mgr, err := compose.New(ctx, compose.Options{Topology: top, Store: st, Drivers: drivers, CatchUp: f.CatchUp, Spread: true})
	if err != nil {
		t.Fatal(err)
	}
	f.Compositions(mgr)
	go f.Run(ctx, 200*time.Millisecond)
	return &node{st: st, mgr: mgr, f: f}
}

// TestReplicasStorm: three replicas compose and decompose on one database
// and one set of fabrics at once, from eight clients each sending to a
// random replica. Afterwards no block is in two compositions, every
// replica's snapshot equals the database, the fabrics hold exactly what
// the database says, and the history of acknowledged operations is
// linearizable on the allocation model.
func TestReplicasStorm(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL")
	}
	pg := pgtest.Start(t)
	url := pg.CreateDatabase(t, pgtest.DatabaseName(t))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	top, err := topology.Parse("racks", topology.GenerateRacks(2))
	if err != nil {
		t.Fatal(err)
	}
	drivers, err := emulated.NewAll(top, clock.Instant{})
	if err != nil {
		t.Fatal(err)
	}
	var nodes []*node
	for range 3 {
		nodes = append(nodes, startNode(t, ctx, url, top, drivers))
	}

	var (
		mu      sync.Mutex
		history []porcupine.Operation
		acked   int
	)
	record := func(client int, call, ret int64, in alloctest.Op, ok bool) {
		mu.Lock()
		defer mu.Unlock()
		history = append(history, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: alloctest.Result{OK: ok}, Return: ret})
		if ok {
			acked++
		}
	}
	needs := [][]schedule.Need{
		{{Kind: inventory.GPU, Count: 1}},
		{{Kind: inventory.NVMe, Count: 1}},
		{{Kind: inventory.GPU, Count: 2}},
	}
	var wg sync.WaitGroup
	for c := range 8 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(c), 7))
			var mine []string
			for range 25 {
				n := nodes[rng.IntN(len(nodes))]
				call := time.Now().UnixNano()
				if len(mine) > 0 && rng.IntN(3) == 0 {
					id := mine[0]
					mine = mine[1:]
					err := n.mgr.Decompose(ctx, id, 0)
					if err != nil && !errors.Is(err, compose.ErrNotFound) {
						t.Errorf("decompose %s: %v", id, err)
					}
					record(c, call, time.Now().UnixNano(), alloctest.Op{ID: id}, err == nil)
					continue
				}
				sys, err := n.mgr.Compose(ctx, compose.Request{Needs: needs[rng.IntN(len(needs))]})
				ret := time.Now().UnixNano()
				if err != nil {
					var u *schedule.Unsatisfiable
					if !errors.As(err, &u) && !errors.Is(err, store.ErrConflict) {
						t.Errorf("compose: %v", err)
					}
					record(c, call, ret, alloctest.Op{Compose: true}, false)
					continue
				}
				mine = append(mine, sys.ID)
				record(c, call, ret, alloctest.Op{Compose: true, ID: sys.ID, Blocks: sortedBlocks(sys)}, true)
			}
		})
	}
	wg.Wait()
	if acked == 0 {
		t.Fatal("no operation succeeded")
	}
	var conflicts, replans int64
	for _, n := range nodes {
		c, r := n.mgr.Conflicts()
		conflicts, replans = conflicts+c, replans+r
	}
	t.Logf("%d operations, %d acknowledged, %d conflicts with another replica, %d placed again", len(history), acked, conflicts, replans)

	// Every replica's snapshot equals the database once it has caught up.
	stored, err := nodes[0].st.Compositions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := describe(stored)
	for i, n := range nodes {
		if err := n.f.CatchUp(ctx); err != nil {
			t.Fatal(err)
		}
		if got := describe(n.mgr.List()); !slices.Equal(got, want) {
			t.Errorf("replica %d's snapshot:\n%s\nthe database:\n%s", i, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
	// No block in two compositions; the fabrics hold what the database says.
	owner := map[string]string{}
	var expected []string
	for _, c := range stored {
		if c.State != inventory.Composed {
			t.Errorf("composition %s left %s", c.ID, c.State)
		}
		for _, b := range c.AllBlocks() {
			if o, ok := owner[b]; ok {
				t.Errorf("block %s in %s and %s", b, o, c.ID)
			}
			owner[b] = c.ID
			if blk := top.Block(b); blk.Device != nil {
				expected = append(expected, b+" -> "+c.Host)
			}
		}
	}
	var attached []string
	for _, d := range drivers {
		st, err := d.Discover(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range st.Attachments {
			attached = append(attached, a.Block+" -> "+a.Host)
		}
	}
	sort.Strings(expected)
	sort.Strings(attached)
	if !slices.Equal(attached, expected) {
		t.Errorf("fabric attachments %v, the database says %v", attached, expected)
	}
	res, info := porcupine.CheckOperationsVerbose(alloctest.Model, history, 30*time.Second)
	if res != porcupine.Ok {
		t.Errorf("history of %d operations is not linearizable on the allocation model (%v)", len(history), res)
		_ = info
	}
}

func sortedBlocks(c *inventory.Composition) []string {
	b := slices.Clone(c.AllBlocks())
	slices.Sort(b)
	return b
}

// describe returns "id@version state blocks" per system composition.
func describe(cs []*inventory.Composition) []string {
	var out []string
	for _, c := range cs {
		out = append(out, fmt.Sprintf("%s@%d %s %v", c.ID, c.Version, c.State, sortedBlocks(c)))
	}
	sort.Strings(out)
	return out
}
