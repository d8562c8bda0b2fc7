package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"rackpool/api"
	"rackpool/internal/topology"
)

// TestKillDuringManifestStorm kills `serve` with SIGKILL while clients run
// multi-stanza Compose actions (some composing two or three systems, some
// also decomposing a system an earlier action composed), with fabrics
// taking their modelled time, restarts it and checks that every manifest
// was applied whole or not at all: its systems all present or all absent,
// the systems it decomposed gone exactly when its new ones exist, every
// acknowledged manifest applied, and no block held twice.
func TestKillDuringManifestStorm(t *testing.T) {
	skipShort(t)
	data := t.TempDir()
	env := []string{"RACKPOOL_ADMIN_PASSWORD=" + password}
	topo := filepath.Join(t.TempDir(), "racks.yaml")
	if err := os.WriteFile(topo, topology.GenerateRacks(10), 0o644); err != nil {
		t.Fatal(err)
	}
	type action struct {
		names     []string // the systems it composes, by name
		decompose string   // the ID of a system it tears down, or ""
		acked     bool
	}
	needs := [][]api.Need{
		{{Kind: "gpu", Count: 1}},
		{{Kind: "nvme", Count: 1}, {Kind: "memory", Capacity: "16GiB"}},
		{{Kind: "hdd", Count: 2}},
		{{Kind: "memory", Capacity: "8GiB"}, {Kind: "nic", Count: 1}},
	}
	for round := range 2 {
		srv := start(t, data, env, "--topology", topo)
		c := srv.client()
		var (
			mu      sync.Mutex
			actions []*action
			nameOf  = map[string]string{} // acknowledged system ID → name
		)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for w := range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(w), uint64(round)))
				var mine []string // IDs of systems acknowledged and not yet targeted
				for i := range 100 {
					select {
					case <-stop:
						return
					default:
					}
					a := &action{}
					var stanzas []api.Stanza
					for k := range 2 + rng.IntN(2) {
						name := fmt.Sprintf("r%d-w%d-a%d-s%d", round, w, i, k)
						a.names = append(a.names, name)
						stanzas = append(stanzas, api.Stanza{ID: name, Compose: &api.ComposeRequest{Needs: needs[rng.IntN(len(needs))]}})
					}
					if len(mine) > 0 && rng.IntN(2) == 0 {
						a.decompose, mine = mine[0], mine[1:]
						stanzas = append(stanzas, api.Stanza{ID: fmt.Sprintf("r%d-w%d-a%d-d", round, w, i), Decompose: a.decompose})
					}
					mu.Lock()
					actions = append(actions, a)
					mu.Unlock()
					ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
					systems, err := c.ApplyManifest(ctx, stanzas)
					cancel()
					if err != nil {
						if isDown(err) {
							return
						}
						time.Sleep(20 * time.Millisecond) // the racks are full now and then
						continue
					}
					mu.Lock()
					a.acked = true
					for _, s := range systems {
						nameOf[s.ID] = s.Name
						mine = append(mine, s.ID)
					}
					mu.Unlock()
				}
			}()
		}
		time.Sleep(1500 * time.Millisecond)
		if err := srv.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		close(stop)
		_ = srv.cmd.Wait()
		wg.Wait()
		acked := 0
		for _, a := range actions {
			if a.acked {
				acked++
			}
		}
		t.Logf("round %d: %d manifests sent, %d acknowledged before the kill", round, len(actions), acked)
		if acked == 0 {
			t.Fatal("no manifest was acknowledged before the kill; the test proves nothing")
		}

		srv = start(t, data, env, "--topology", topo)
		c = srv.client()
		systems, err := c.Systems(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		present := map[string]bool{} // by name
		presentID := map[string]bool{}
		composed := systems[:0]
		for _, s := range systems {
			if s.SystemType == "Composed" {
				present[s.Name] = true
				presentID[s.ID] = true
				composed = append(composed, s)
			}
		}
		targeted := map[string]bool{} // names some later manifest tried to decompose
		for _, a := range actions {
			if a.decompose != "" {
				targeted[nameOf[a.decompose]] = true
			}
		}
		for _, a := range actions {
			var in, kept int
			for _, n := range a.names {
				if targeted[n] {
					continue
				}
				kept++
				if present[n] {
					in++
				}
			}
			if in != 0 && in != kept {
				t.Errorf("manifest %v half applied: %d of its %d systems exist", a.names, in, kept)
			}
			if a.acked && in != kept {
				t.Errorf("acknowledged manifest %v lost: %d of its %d systems exist", a.names, in, kept)
			}
			if a.decompose != "" && kept > 0 && in == kept == presentID[a.decompose] {
				t.Errorf("manifest %v (applied: %v) and the system it decomposes, %s (present: %v), disagree",
					a.names, in == kept, a.decompose, presentID[a.decompose])
			}
		}
		checkConsistent(t, take(t, c), maxCompositions(t, c))
		// Start the next round on empty racks.
		for _, s := range composed {
			if err := c.Decompose(context.Background(), s.ID); err != nil {
				t.Fatalf("decompose %s: %v", s.ID, err)
			}
		}
		srv.kill()
	}
}
