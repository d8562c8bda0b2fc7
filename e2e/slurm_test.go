package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"rackpool/api"
	"rackpool/internal/childproc"
	"rackpool/internal/topology"
)

// slurmCluster is a real Slurm (Debian's slurmctld, slurmd and munge)
// in a temp directory on loopback, whose power-saving programs are
// `rackpool slurm` against s, and whose "machines" this test plays: a
// node's slurmd runs while rackpool's system of that node is powered On.
type slurmCluster struct {
	t    *testing.T
	dir  string
	conf string
	env  []string
	logs map[string]*syncBuffer

	ctld *exec.Cmd

	mu      sync.Mutex
	slurmds map[string]*exec.Cmd
}

// startCtld starts slurmctld (recovering its saved state) and waits until
// it answers.
func (sc *slurmCluster) startCtld() {
	sc.t.Helper()
	sc.ctld = childproc.Command("slurmctld-wlm", "-D", "-f", sc.conf)
	sc.ctld.Env = sc.env
	sc.ctld.Stdout, sc.ctld.Stderr = sc.logs["slurmctld"], sc.logs["slurmctld"]
	childproc.Start(sc.t, sc.ctld)
	sc.waitFor("slurmctld", 30*time.Second, func() bool { _, err := sc.run("sinfo"); return err == nil })
}

// killCtld kills slurmctld and what it runs (its power programs) at once.
func (sc *slurmCluster) killCtld() {
	childproc.Stop(sc.ctld)
	_ = sc.ctld.Wait()
}

// slurmNodes are the test's nodes and their hosts in the example rack.
var slurmNodes = [][2]string{{"n1", "host1"}, {"n2", "host2"}}

func startSlurm(t *testing.T, s *server, suspendTime string) *slurmCluster {
	t.Helper()
	needTools(t, "slurmctld-wlm", "slurmd-wlm", "munged", "sbatch", "scontrol")
	dir, err := os.MkdirTemp("", "rp-slurm-") // short: munge's socket path
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sc := &slurmCluster{t: t, dir: dir, conf: filepath.Join(dir, "etc", "slurm.conf"), logs: map[string]*syncBuffer{}, slurmds: map[string]*exec.Cmd{}}
	for _, d := range []string{"etc", "munge", "state", "spool", "log"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	key := make([]byte, 1024)
	for i := range key {
		key[i] = byte(i*7 + 3)
	}
	if err := os.WriteFile(filepath.Join(dir, "munge", "munge.key"), key, 0o400); err != nil {
		t.Fatal(err)
	}
	socket := filepath.Join(dir, "munge", "munge.socket")
	munge := childproc.Command("munged", "-F", "-f", "--socket="+socket, "--key-file="+filepath.Join(dir, "munge", "munge.key"),
		"--pid-file="+filepath.Join(dir, "munge", "munged.pid"), "--log-file="+filepath.Join(dir, "munge", "munged.log"),
		"--seed-file="+filepath.Join(dir, "munge", "seed"))
	sc.logs["munged"] = &syncBuffer{}
	munge.Stdout, munge.Stderr = sc.logs["munged"], sc.logs["munged"]
	childproc.Start(t, munge)
	sc.waitFor("munged's socket", 20*time.Second, func() bool { _, err := os.Stat(socket); return err == nil })

	// The slurm configuration of rackpool, and what `rackpool slurm
	// config` makes of it.
	var nodes strings.Builder
	for _, n := range slurmNodes {
		fmt.Fprintf(&nodes, "  %s: {host: %s, hostname: localhost, addr: 127.0.0.1, port: %s, cpus: 1, memory_mib: 100}\n", n[0], n[1], freePort(t))
		if err := os.MkdirAll(filepath.Join(dir, "spool", n[0]), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	cfg := filepath.Join(dir, "etc", "rackpool-slurm.yaml")
	write(t, cfg, "nodes:\n"+nodes.String()+`templates:
  gpu1: {needs: ["1 gpu"]}
  gpu2: {needs: ["2 gpu"], affinity: same-drawer}
  nvme: {needs: ["1 nvme"]}
`)
	envFile := filepath.Join(dir, "etc", "slurm.env")
	write(t, envFile, fmt.Sprintf("RACKPOOL_URL=%s\nRACKPOOL_USER=Administrator\nRACKPOOL_PASSWORD=%s\nRACKPOOL_CA_FILE=%s\nSLURM_CONF=%s\n",
		s.url, password, s.ca, sc.conf))
	out, err := childproc.Command(binary, "slurm", "config", "--config", cfg, "--out", filepath.Join(dir, "etc"), "--env-file", envFile,
		"--log", filepath.Join(dir, "log", "power.log"), "--suspend-time", suspendTime, "--resume-timeout", "60s", "--suspend-timeout", "10s",
		"--partition", "main").CombinedOutput()
	if err != nil {
		t.Fatalf("rackpool slurm config: %v\n%s", err, out)
	}
	write(t, sc.conf, fmt.Sprintf(`ClusterName=rp
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=%s
SlurmdPort=%s
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=%s
CredType=cred/munge
StateSaveLocation=%s
SlurmdSpoolDir=%s/%%n
SlurmctldPidFile=%s/slurmctld.pid
SlurmdPidFile=%s/slurmd-%%n.pid
SlurmctldLogFile=%s/slurmctld.log
SlurmdLogFile=%s/slurmd-%%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
SwitchType=switch/none
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
SlurmctldTimeout=30
SlurmdTimeout=30
MinJobAge=600
ResumeRate=0
SuspendRate=0
TreeWidth=65533
Include %s
`, freePort(t), freePort(t), socket, filepath.Join(dir, "state"), filepath.Join(dir, "spool"), dir, dir,
		filepath.Join(dir, "log"), filepath.Join(dir, "log"), filepath.Join(dir, "etc", "slurm-rackpool.conf")))
	sc.env = append(os.Environ(), "SLURM_CONF="+sc.conf)
	sc.logs["slurmctld"] = &syncBuffer{}
	sc.startCtld()

	// The machines: a node's slurmd runs while its system is powered On.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); sc.playMachines(ctx, s.client()) }()
	t.Cleanup(func() {
		cancel()
		<-done
		sc.mu.Lock()
		defer sc.mu.Unlock()
		for _, d := range sc.slurmds {
			childproc.Stop(d)
			_ = d.Wait()
		}
		if t.Failed() {
			for _, args := range [][]string{{"scontrol", "show", "node"}, {"squeue", "-l"}, {"scontrol", "show", "job"}} {
				out, _ := sc.run(args[0], args[1:]...)
				t.Logf("%v:\n%s", args, out)
			}
			logs, _ := filepath.Glob(filepath.Join(dir, "log", "*.log"))
			for _, f := range logs {
				b, _ := os.ReadFile(f)
				t.Logf("%s:\n%s", filepath.Base(f), b)
			}
		}
	})
	return sc
}

// playMachines starts a node's slurmd when rackpool powers the node's
// system on and stops it when the system goes or is powered off: the
// host booting and shutting down.
func (sc *slurmCluster) playMachines(ctx context.Context, c *api.Client) {
	for ctx.Err() == nil {
		on := map[string]bool{}
		if systems, err := c.Systems(ctx); err == nil {
			for _, sys := range systems {
				node, ok := strings.CutPrefix(sys.Name, "slurm ")
				if !ok || sys.SystemType != "Composed" {
					continue
				}
				node, _, _ = strings.Cut(node, " ")
				var st struct{ PowerState string }
				if _, err := c.Do(ctx, "GET", "/redfish/v1/Systems/"+sys.ID, nil, &st); err == nil && st.PowerState == "On" {
					on[node] = true
				}
			}
		}
		sc.mu.Lock()
		for _, n := range slurmNodes {
			d := sc.slurmds[n[0]]
			switch {
			case on[n[0]] && d == nil:
				// A machine that has just booted: slurmd in a time
				// namespace whose boot time is now (Slurm checks a
				// resumed node booted after it asked).
				cmd := childproc.Command("unshare", "--time", "--boottime", fmt.Sprintf("-%d", bootNow()),
					"slurmd-wlm", "-D", "-N", n[0], "-f", sc.conf)
				cmd.Env = append(sc.env, "RACKPOOL_SLURM_NODE="+n[0]) // its host name, were it a machine of its own
				if err := cmd.Start(); err == nil {
					sc.slurmds[n[0]] = cmd
				}
			case !on[n[0]] && d != nil:
				childproc.Stop(d)
				_ = d.Wait()
				delete(sc.slurmds, n[0])
			}
		}
		sc.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// bootNow waits for the machine's uptime to pass a whole second and
// returns it: a time namespace offset by it has been up for a few
// milliseconds, so slurmd reports a boot time of this very second (offsets
// are whole seconds).
func bootNow() int {
	// A boot takes at least into the next second of the wall clock:
	// slurmd rounds its uptime up (sysinfo), and slurmctld wants the boot
	// no earlier than the second it asked for the resume in.
	now := time.Now()
	time.Sleep(now.Truncate(time.Second).Add(time.Second + 10*time.Millisecond).Sub(now))
	b, _ := os.ReadFile("/proc/uptime")
	var up float64
	fmt.Sscan(string(b), &up)
	whole := int(up) + 1
	time.Sleep(time.Duration((float64(whole)-up)*float64(time.Second)) + 5*time.Millisecond)
	return whole
}

func (sc *slurmCluster) run(name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Env = sc.env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (sc *slurmCluster) waitFor(what string, timeout time.Duration, ok func() bool) time.Duration {
	sc.t.Helper()
	start := time.Now()
	for !ok() {
		if time.Since(start) > timeout {
			sc.t.Fatalf("%s: not after %v", what, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return time.Since(start)
}

// job reads a field of a job (`scontrol show job -o`).
func (sc *slurmCluster) job(id, field string) string {
	out, err := sc.run("scontrol", "show", "job", "-o", id)
	if err != nil {
		return ""
	}
	for _, f := range strings.Fields(out) {
		if v, ok := strings.CutPrefix(f, field+"="); ok {
			return v
		}
	}
	return ""
}

// sbatch submits a job and returns its ID.
func (sc *slurmCluster) sbatch(args ...string) string {
	sc.t.Helper()
	out, err := sc.run("sbatch", append([]string{"--parsable", "-p", "main", "-o", filepath.Join(sc.dir, "log", "job-%j.out")}, args...)...)
	if err != nil {
		sc.t.Fatalf("sbatch %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(out)
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
	sc := startSlurm(t, s, "3s")

	// Two jobs, each for two GPUs of one drawer, at once: the placement
	// engine gives both nodes what they asked for.
	top := topology.LoadDefault()
	start := time.Now()
	var ids []string
	for range 2 {
		ids = append(ids, sc.sbatch("--constraint=gpu2", "--wrap", "echo ran on $SLURMD_NODENAME; sleep 4"))
	}
	sc.waitFor("both jobs running", 90*time.Second, func() bool {
		return sc.job(ids[0], "JobState") == "RUNNING" && sc.job(ids[1], "JobState") == "RUNNING"
	})
	t.Logf("sbatch to both jobs running: %v", time.Since(start).Round(time.Millisecond))
	systems := slurmSystems(t, c)
	var nodes []string
	for _, id := range ids {
		node := sc.job(id, "NodeList")
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
		sc.waitFor("the job done", 60*time.Second, func() bool { return sc.job(id, "JobState") == "COMPLETED" })
		if b, _ := os.ReadFile(filepath.Join(sc.dir, "log", "job-"+id+".out")); !strings.Contains(string(b), "ran on "+nodes[i]) {
			t.Errorf("job %s's output: %q", id, b)
		}
	}
	took := sc.waitFor("the idle node taken apart", 60*time.Second, func() bool { return len(slurmSystems(t, c)) == 0 })
	t.Logf("job done to the node taken apart: %v (SuspendTime 3 s)", took.Round(time.Millisecond))

	// The fabric fails the next attach: the node goes down at once with
	// rackpool's reason, the job is requeued, nothing stays composed.
	if _, err := c.Do(context.Background(), "POST", "/redfish/v1/Fabrics/falcon1/Actions/Oem/Rackpool.InjectFault",
		map[string]any{"Kind": "attach-fails", "Count": 1}, nil); err != nil {
		t.Fatal(err)
	}
	id := sc.sbatch("--constraint=gpu1", "--wrap", "echo ran on $SLURMD_NODENAME")
	var down string
	sc.waitFor("a node down with rackpool's reason", 60*time.Second, func() bool {
		out, _ := sc.run("sinfo", "-h", "-R", "-o", "%N %E")
		if strings.Contains(out, "rackpool:") {
			down = strings.TrimSpace(out)
			return true
		}
		return false
	})
	t.Logf("down: %s; job %s %s (%s)", down, id, sc.job(id, "JobState"), sc.job(id, "Reason"))
	if got := slurmSystems(t, c); len(got) != 0 {
		t.Fatalf("after the failed resume rackpool holds %v", got)
	}
	if r := sc.job(id, "Restarts"); r == "0" || r == "" {
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
	sc := startSlurm(t, s, "3s")
	id := sc.sbatch("--constraint=gpu1", "--wrap", "echo ran on $SLURMD_NODENAME")
	var name string
	sc.waitFor("a composition for the job", 60*time.Second, func() bool {
		for n := range slurmSystems(t, c) {
			name = n
			return true
		}
		return false
	})
	sc.killCtld()
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
	sc.startCtld()
	sc.waitFor("the job done", 120*time.Second, func() bool { return sc.job(id, "JobState") == "COMPLETED" })
	if blocks := slurmSystems(t, c)[name]; len(blocks) != 0 && len(blocks) != 2 {
		t.Errorf("%s holds %v: not its host and one GPU", name, blocks)
	}
	sc.waitFor("the idle node taken apart", 90*time.Second, func() bool { return len(slurmSystems(t, c)) == 0 })
}
