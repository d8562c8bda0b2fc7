package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"rackpool/api"
	"rackpool/internal/slurm"
	"rackpool/internal/slurm/slurmtest"
	"rackpool/internal/topology"
)

// startSlurm is a real Slurm whose nodes n1 and n2 are host1 and host2 of
// s's example rack, with templates gpu1, gpu2 (two GPUs of one drawer) and
// nvme, suspended after 3 s idle.
func startSlurm(t *testing.T, s *server) *slurmtest.Cluster {
	t.Helper()
	needTools(t, slurmtest.Tools...)
	return slurmtest.Start(t, slurmtest.Options{Binary: binary, URL: s.url, User: "Administrator", Password: password, CAFile: s.ca,
		Nodes: [][2]string{{"n1", "host1"}, {"n2", "host2"}}, SuspendTime: "3s",
		Templates: `  gpu1: {needs: ["1 gpu"]}
  gpu2: {needs: ["2 gpu"], affinity: same-drawer}
  nvme: {needs: ["1 nvme"]}
`})
}

// slurmSystems lists rackpool's composed systems: name and blocks. A
// listing that races a decompose (a member gone before it is read) is
// read again.
func slurmSystems(t *testing.T, c *api.Client) map[string][]string {
	t.Helper()
	systems, err := c.Systems(context.Background())
	for try := 0; err != nil && try < 5; try++ {
		time.Sleep(20 * time.Millisecond)
		systems, err = c.Systems(context.Background())
	}
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, s := range systems {
		if s.SystemType != "Composed" {
			continue
		}
		for _, b := range s.Oem.Rackpool.Blocks {
			out[s.Name] = append(out[s.Name], b.ID)
		}
	}
	return out
}

// TestSlurmPowerSaving runs a real Slurm whose power saving is rackpool:
// two jobs asking for --constraint=gpu2 resume two nodes, which rackpool
// composes each with two GPUs of one drawer on its host and powers on; the
// jobs run there; after the idle time the nodes are suspended and their
// compositions taken apart; a composition the fabric fails marks the node
// down at once with rackpool's reason and requeues the job, with nothing
// left composed.
func TestSlurmPowerSaving(t *testing.T) {
	skipShort(t)
	s := startDefault(t, "--fabric-time", "instant")
	c := s.client()
	sc := startSlurm(t, s)

	// Two jobs, each for two GPUs of one drawer, at once: the placement
	// engine gives both nodes what they asked for.
	top := topology.LoadDefault()
	start := time.Now()
	var ids []string
	for range 2 {
		ids = append(ids, sc.Sbatch("--constraint=gpu2", "--wrap", "echo ran on $SLURMD_NODENAME; sleep 4"))
	}
	sc.WaitFor("both jobs running", 90*time.Second, func() bool {
		return sc.Job(ids[0], "JobState") == "RUNNING" && sc.Job(ids[1], "JobState") == "RUNNING"
	})
	t.Logf("sbatch to both jobs running: %v", time.Since(start).Round(time.Millisecond))
	systems := slurmSystems(t, c)
	var nodes []string
	for _, id := range ids {
		node := sc.Job(id, "NodeList")
		nodes = append(nodes, node)
		blocks := systems["slurm "+node+" [gpu2]"]
		drawers := map[string]bool{}
		for _, b := range blocks {
			if blk := top.Block(b); blk != nil && blk.Device != nil && blk.Device.Drawer != nil {
				drawers[blk.Device.Fabric.ID+"/"+blk.Device.Drawer.ID] = true
			}
		}
		if len(blocks) != 3 || len(drawers) != 1 {
			t.Fatalf("job %s runs on %s: rackpool holds %v, want its host and two GPUs of one drawer", id, node, systems)
		}
	}
	if len(systems) != 2 || nodes[0] == nodes[1] {
		t.Fatalf("two jobs on %v: rackpool holds %v", nodes, systems)
	}
	for i, id := range ids {
		sc.WaitFor("the job done", 60*time.Second, func() bool { return sc.Job(id, "JobState") == "COMPLETED" })
		if b, _ := os.ReadFile(filepath.Join(sc.Dir(), "log", "job-"+id+".out")); !strings.Contains(string(b), "ran on "+nodes[i]) {
			t.Errorf("job %s's output: %q", id, b)
		}
	}
	took := sc.WaitFor("the idle node taken apart", 60*time.Second, func() bool { return len(slurmSystems(t, c)) == 0 })
	t.Logf("job done to the node taken apart: %v (SuspendTime 3 s)", took.Round(time.Millisecond))

	// The fabric fails the next attach: the node goes down at once with
	// rackpool's reason, the job is requeued, nothing stays composed.
	if _, err := c.Do(context.Background(), "POST", "/redfish/v1/Fabrics/falcon1/Actions/Oem/Rackpool.InjectFault",
		map[string]any{"Kind": "attach-fails", "Count": 1}, nil); err != nil {
		t.Fatal(err)
	}
	id := sc.Sbatch("--constraint=gpu1", "--wrap", "echo ran on $SLURMD_NODENAME")
	var down string
	sc.WaitFor("a node down with rackpool's reason", 60*time.Second, func() bool {
		out, _ := sc.Run("sinfo", "-h", "-R", "-o", "%N %E")
		if strings.Contains(out, "rackpool:") {
			down = strings.TrimSpace(out)
			return true
		}
		return false
	})
	t.Logf("down: %s; job %s %s (%s)", down, id, sc.Job(id, "JobState"), sc.Job(id, "Reason"))
	if got := slurmSystems(t, c); len(got) != 0 {
		t.Fatalf("after the failed resume rackpool holds %v", got)
	}
	if r := sc.Job(id, "Restarts"); r == "0" || r == "" {
		t.Errorf("job %s was not requeued (Restarts=%s)", id, r)
	}
}

// TestSlurmRestartMidResume kills slurmctld, and the resume program it
// runs, while a node is being resumed (rackpool's modelled power-on takes
// seconds) and starts it again: the node's composition is whole (the
// compose is all or nothing), the job runs on it once it is up, and the
// idle node is taken apart: nothing half-composed, nothing leaked.
func TestSlurmRestartMidResume(t *testing.T) {
	skipShort(t)
	s := startDefault(t) // modelled fabric and power-on times
	c := s.client()
	sc := startSlurm(t, s)
	id := sc.Sbatch("--constraint=gpu1", "--wrap", "echo ran on $SLURMD_NODENAME")
	var name string
	sc.WaitFor("a composition for the job", 60*time.Second, func() bool {
		for n := range slurmSystems(t, c) {
			name = n
			return true
		}
		return false
	})
	sc.KillCtld()
	power := ""
	if systems, err := c.Systems(context.Background()); err == nil {
		for _, sys := range systems {
			if sys.Name == name {
				var st struct{ PowerState string }
				_, _ = c.Do(context.Background(), "GET", "/redfish/v1/Systems/"+sys.ID, nil, &st)
				power = st.PowerState
			}
		}
	}
	if power == "On" {
		t.Fatalf("%s was On before slurmctld was killed: the resume had finished", name)
	}
	t.Logf("slurmctld killed while rackpool holds %v, powering on (%s)", slurmSystems(t, c), power)
	sc.StartCtld()
	sc.WaitFor("the job done", 120*time.Second, func() bool { return sc.Job(id, "JobState") == "COMPLETED" })
	if blocks := slurmSystems(t, c)[name]; len(blocks) != 0 && len(blocks) != 2 {
		t.Errorf("%s holds %v: not its host and one GPU", name, blocks)
	}
	sc.WaitFor("the idle node taken apart", 90*time.Second, func() bool { return len(slurmSystems(t, c)) == 0 })
}

// noSlurm is slurm.Slurm for the power programs run without slurmctld.
type noSlurm struct{ failed []string }

func (noSlurm) JobFeatures(context.Context, int64) ([]string, error) { return nil, nil }
func (n *noSlurm) Fail(_ context.Context, node, reason string) error {
	n.failed = append(n.failed, node+": "+reason)
	return nil
}

// TestSlurmKeepWarm runs the power programs' logic against a real serve
// on a clock of its own: while gpu1 nodes are resumed every interval, a
// suspend keeps n1 composed (powered off) and the next resume for gpu1
// reuses that composition; once its features stop being asked for, a
// suspend takes it apart, and a kept one nobody resumes within an interval
// is taken apart by the next program that runs.
func TestSlurmKeepWarm(t *testing.T) {
	skipShort(t)
	s := startDefault(t, "--fabric-time", "instant")
	c := s.client()
	ctx := context.Background()
	cfg, err := slurm.ParseConfig("slurm.yaml", []byte(fmt.Sprintf(`nodes:
  n1: {host: host1}
  n2: {host: host2}
templates:
  gpu1: {needs: ["1 gpu"]}
  nvme: {needs: ["1 nvme"]}
keep_warm: {state: %s, interval: 10m, window: 4h}
`, filepath.Join(t.TempDir(), "history.json"))))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 1, 8, 0, 0, 0, time.UTC)
	p := &slurm.Power{Rackpool: c, Config: cfg, Slurm: &noSlurm{}, Now: func() time.Time { return now }}
	system := func(node string) (id, power string) {
		systems, err := c.Systems(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, sys := range systems {
			if strings.HasPrefix(sys.Name, "slurm "+node+" ") {
				var st struct{ PowerState string }
				if _, err := c.Do(ctx, "GET", "/redfish/v1/Systems/"+sys.ID, nil, &st); err != nil {
					t.Fatal(err)
				}
				return sys.ID, st.PowerState
			}
		}
		return "", ""
	}
	// n2 is resumed for gpu1 every interval for two hours: gpu1 is wanted.
	for range 12 {
		if err := p.Resume(ctx, map[string][]string{"n2": {"gpu1"}}); err != nil {
			t.Fatal(err)
		}
		now = now.Add(9 * time.Minute)
		if err := p.Suspend(ctx, []string{"n2"}); err != nil {
			t.Fatal(err)
		}
		now = now.Add(time.Minute)
	}
	if err := p.Resume(ctx, map[string][]string{"n1": {"gpu1"}}); err != nil {
		t.Fatal(err)
	}
	first, _ := system("n1")
	if err := p.Suspend(ctx, []string{"n1"}); err != nil {
		t.Fatal(err)
	}
	if id, power := system("n1"); id != first || power != "Off" {
		t.Fatalf("n1 suspended while gpu1 is wanted: system %q %s, want %s kept and Off", id, power, first)
	}
	now = now.Add(5 * time.Minute)
	if err := p.Resume(ctx, map[string][]string{"n1": {"gpu1"}}); err != nil {
		t.Fatal(err)
	}
	if id, power := system("n1"); id != first || power != "On" {
		t.Fatalf("n1 resumed for gpu1 again: system %q %s, want the kept %s On", id, power, first)
	}
	// Kept again, then nobody resumes it: the next program (a resume of
	// n2, an interval later) takes it apart.
	if err := p.Suspend(ctx, []string{"n1"}); err != nil {
		t.Fatal(err)
	}
	now = now.Add(11 * time.Minute)
	if err := p.Resume(ctx, map[string][]string{"n2": {"nvme"}}); err != nil {
		t.Fatal(err)
	}
	if id, _ := system("n1"); id != "" {
		t.Fatalf("a kept composition unused for an interval is still there: %s", id)
	}
	// nvme was never wanted before: its node is taken apart on suspend.
	if err := p.Suspend(ctx, []string{"n2"}); err != nil {
		t.Fatal(err)
	}
	if id, _ := system("n2"); id != "" {
		t.Fatalf("n2 (nvme, not forecast) kept: %s", id)
	}
}
