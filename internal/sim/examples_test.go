package sim

import (
	"path/filepath"
	"testing"
)

// TestShippedScenarios loads every scenario under examples/sim, as a user
// would, and checks that the P4-scale one is P4's full pod.
func TestShippedScenarios(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "examples", "sim", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no shipped scenarios: %v", err)
	}
	for _, f := range files {
		sc, err := LoadScenario(f)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if sc.Sweep == nil {
			if err := sc.Config.Validate(); err != nil {
				t.Errorf("%s: %v", f, err)
			}
		}
		if filepath.Base(f) == "monet-p4-scale.yaml" {
			c := sc.Config
			if cards := c.Trays * c.CardsPerTray; cards != 98_304 || c.Planes != 8 || c.Workload.Requests != 1_000_000 || c.Policy != "rackpool" {
				t.Errorf("%s: %d cards, %d planes, %d requests, policy %s; want P4's 98,304 cards, 8 planes, 10^6 requests, rackpool",
					f, cards, c.Planes, c.Workload.Requests, c.Policy)
			}
		}
	}
}
