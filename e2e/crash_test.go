package e2e

import (
	"context"
	"encoding/csv"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"rackpool/api"
	"rackpool/internal/topology"
)

// TestKillDuringComposeStorm kills `serve` with SIGKILL while clients
// compose and decompose concurrently (fabrics taking their real modelled
// time, so many workflows are mid-attach), restarts it on the same data
// directory and checks: every composition is fully Composed or absent, no
// block is stuck Composing or allocated twice, every acknowledged
// composition that was not being decomposed survived with its blocks.
func TestKillDuringComposeStorm(t *testing.T) {
	skipShort(t)
	killDuringComposeStorm(t)
}

// killDuringComposeStorm is TestKillDuringComposeStorm with serve's extra
// flags (another store).
func killDuringComposeStorm(t *testing.T, flags ...string) {
	data := t.TempDir()
	env := []string{"RACKPOOL_ADMIN_PASSWORD=" + password}
	// 10 racks of 4 hosts: room for dozens of compositions at once.
	topo := filepath.Join(t.TempDir(), "racks.yaml")
	if err := os.WriteFile(topo, topology.GenerateRacks(10), 0o644); err != nil {
		t.Fatal(err)
	}
	for round := 0; round < 2; round++ {
		srv := start(t, data, env, append([]string{"--topology", topo}, flags...)...)
		c := srv.client()
		var (
			mu         sync.Mutex
			acked      = map[string][]string{} // composed and acknowledged
			attempted  = map[string]bool{}     // decompose sent, maybe not acknowledged
			acks, errs int
			// Every acknowledged operation's audit detail ("composed
			// sys-…", "decomposed sys-…"): committed with the outcome,
			// each must survive the kill too.
			audited []string
		)
		needs := [][]api.Need{
			{{Kind: "gpu", Count: 1}},
			{{Kind: "nvme", Count: 1}, {Kind: "memory", Capacity: "16GiB"}},
			{{Kind: "hdd", Count: 2}, {Kind: "ssd", Count: 1}},
			{{Kind: "memory", Capacity: "32GiB"}, {Kind: "nic", Count: 1}},
			{{Kind: "gpu", Count: 2}, {Kind: "hdd", Count: 1}},
		}
		// The kill comes once enough operations were acknowledged (with
		// more in flight), however slowly a loaded machine gets there.
		const killAfter = 20
		enough := make(chan struct{})
		acked1 := func() { // with mu held
			acks++
			if acks == killAfter {
				close(enough)
			}
		}
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for w := 0; w < 8; w++ {
			wg.Add(1)
			go func(seed uint64) {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(seed, uint64(round)))
				var mine []string
				for i := 0; i < 200; i++ {
					select {
					case <-stop:
						return
					default:
					}
					ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					if len(mine) > 0 && rng.IntN(3) == 0 {
						id := mine[0]
						mu.Lock()
						attempted[id] = true
						mu.Unlock()
						err := c.Decompose(ctx, id)
						cancel()
						if err == nil {
							mine = mine[1:]
							mu.Lock()
							delete(acked, id)
							audited = append(audited, "decomposed "+id)
							acked1()
							mu.Unlock()
						} else if isDown(err) {
							return
						}
						continue
					}
					sys, err := c.Compose(ctx, api.ComposeRequest{Needs: needs[rng.IntN(len(needs))]})
					cancel()
					if err != nil {
						if isDown(err) {
							return
						}
						mu.Lock()
						errs++ // the racks are full: expected now and then
						mu.Unlock()
						time.Sleep(20 * time.Millisecond)
						continue
					}
					var blocks []string
					for _, b := range sys.Links.ResourceBlocks {
						blocks = append(blocks, b.Last())
					}
					mu.Lock()
					acked[sys.ID] = blocks
					audited = append(audited, "composed "+sys.ID)
					acked1()
					mu.Unlock()
					mine = append(mine, sys.ID)
				}
			}(uint64(w))
		}
		workersDone := make(chan struct{})
		go func() { wg.Wait(); close(workersDone) }()
		var waitErr string
		select {
		case <-enough:
		case <-workersDone:
			waitErr = "the clients stopped"
		case <-time.After(5 * time.Minute):
			waitErr = "5 minutes passed"
		}
		if err := srv.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		close(stop)
		_ = srv.cmd.Wait()
		<-workersDone
		mu.Lock()
		t.Logf("round %d: %d acknowledged operations, %d refused, %d live acknowledged compositions at the kill", round, acks, errs, len(acked))
		if acks < killAfter {
			t.Fatalf("round %d: %s before %d operations were acknowledged (%d were, %d refused); the kill would prove little", round, waitErr, killAfter, acks, errs)
		}
		mu.Unlock()

		srv = start(t, data, env, append([]string{"--topology", topo}, flags...)...)
		c = srv.client()
		t.Logf("round %d: recovery log: %d compositions rolled back", round, strings.Count(srv.stderr.String(), "rolled back"))
		snap := take(t, c)
		checkConsistent(t, snap, maxCompositions(t, c))
		out, err := srv.cli("audit", "--format", "csv", "--outcome", "success")
		if err != nil {
			t.Fatalf("rackpool audit: %v\n%s", err, out)
		}
		recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
		if err != nil {
			t.Fatalf("audit CSV: %v", err)
		}
		details := map[string]int{}
		for _, r := range recs[1:] {
			details[r[len(r)-1]]++
		}
		for _, d := range audited {
			if details[d] != 1 {
				t.Errorf("acknowledged %q has %d success audit entries after the crash, want 1", d, details[d])
			}
		}
		for id, blocks := range acked {
			got, ok := snap.systems[id]
			if attempted[id] {
				if ok && !slices.Equal(got, blocks) {
					t.Errorf("%s changed blocks across the crash: %v -> %v", id, blocks, got)
				}
				continue
			}
			if !ok {
				t.Errorf("acknowledged composition %s lost in the crash", id)
				continue
			}
			if !slices.Equal(got, blocks) {
				t.Errorf("%s changed blocks across the crash: %v -> %v", id, blocks, got)
			}
		}
		if round == 1 {
			// Decompose everything: every block must come back Unused.
			for id := range snap.systems {
				if err := c.Decompose(context.Background(), id); err != nil {
					t.Fatalf("decompose %s: %v", id, err)
				}
			}
			for b, st := range take(t, c).states {
				if st != "Unused" {
					t.Errorf("block %s is %s after decomposing everything", b, st)
				}
			}
		}
		srv.kill()
	}
}

func isDown(err error) bool {
	_, isAPI := err.(*api.Error)
	return !isAPI
}

func maxCompositions(t *testing.T, c *api.Client) map[string]int {
	blocks, err := c.Blocks(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, b := range blocks {
		out[b.ID] = b.CompositionStatus.MaxCompositions
	}
	return out
}
