// Package slurmtest runs a real Slurm for tests and benchmarks: Debian's
// slurmctld, slurmd and munge in a temporary directory on loopback, whose
// power-saving programs are `rackpool slurm` (configured by `rackpool slurm
// config`) against a rackpool service, and whose machines it plays: a
// node's slurmd runs while rackpool's system of that node is powered On,
// in a time namespace whose boot time is the moment it was powered on.
package slurmtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"rackpool/api"
	"rackpool/internal/childproc"
)

// TB is what Start needs of a test (testing.TB has it) or a benchmark.
type TB interface {
	Helper()
	Cleanup(func())
	Fatalf(format string, args ...any)
	Logf(format string, args ...any)
	Failed() bool
}

// Options say what Start runs.
type Options struct {
	Binary                      string // rackpool
	URL, User, Password, CAFile string // the rackpool service
	// Nodes are Slurm nodes and their rackpool hosts.
	Nodes [][2]string
	// Templates is the templates section of the slurm configuration file
	// (YAML, indented two spaces).
	Templates   string
	SuspendTime string // --suspend-time of `rackpool slurm config`
}

// Tools are the commands Start runs.
var Tools = []string{"slurmctld-wlm", "slurmd-wlm", "munged", "sbatch", "scontrol", "unshare"}

// buffer is a bytes.Buffer safe for concurrent writers.
type buffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func write(t TB, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatalf("%v", err)
	}
}

func freePort(t TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("%v", err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}

// Dir is the cluster's directory (etc, log, state, spool, munge).
func (sc *Cluster) Dir() string { return sc.dir }

// Cluster is a running Slurm (see the package's comment).
type Cluster struct {
	t    TB
	dir  string
	conf string
	env  []string
	logs map[string]*buffer

	ctld  *exec.Cmd
	nodes [][2]string

	mu      sync.Mutex
	slurmds map[string]*exec.Cmd
}

// StartCtld starts slurmctld (recovering its saved state) and waits until
// it answers.
func (sc *Cluster) StartCtld() {
	sc.t.Helper()
	sc.ctld = childproc.Command("slurmctld-wlm", "-D", "-f", sc.conf)
	sc.ctld.Env = sc.env
	sc.ctld.Stdout, sc.ctld.Stderr = sc.logs["slurmctld"], sc.logs["slurmctld"]
	childproc.Start(sc.t, sc.ctld)
	sc.WaitFor("slurmctld", 30*time.Second, func() bool { _, err := sc.Run("sinfo"); return err == nil })
}

// KillCtld kills slurmctld and what it runs (its power programs) at once.
func (sc *Cluster) KillCtld() {
	childproc.Stop(sc.ctld)
	_ = sc.ctld.Wait()
}

// Start runs munged, writes the configuration with `rackpool slurm config`
// and runs slurmctld, and plays the machines until t's cleanup; it
// reports the logs when t failed.
func Start(t TB, o Options) *Cluster {
	t.Helper()
	dir, err := os.MkdirTemp("", "rp-slurm-") // short: munge's socket path
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sc := &Cluster{t: t, nodes: o.Nodes, dir: dir, conf: filepath.Join(dir, "etc", "slurm.conf"), logs: map[string]*buffer{}, slurmds: map[string]*exec.Cmd{}}
	for _, d := range []string{"etc", "munge", "state", "spool", "log"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatalf("%v", err)
		}
	}
	key := make([]byte, 1024)
	for i := range key {
		key[i] = byte(i*7 + 3)
	}
	if err := os.WriteFile(filepath.Join(dir, "munge", "munge.key"), key, 0o400); err != nil {
		t.Fatalf("%v", err)
	}
	socket := filepath.Join(dir, "munge", "munge.socket")
	munge := childproc.Command("munged", "-F", "-f", "--socket="+socket, "--key-file="+filepath.Join(dir, "munge", "munge.key"),
		"--pid-file="+filepath.Join(dir, "munge", "munged.pid"), "--log-file="+filepath.Join(dir, "munge", "munged.log"),
		"--seed-file="+filepath.Join(dir, "munge", "seed"))
	sc.logs["munged"] = &buffer{}
	munge.Stdout, munge.Stderr = sc.logs["munged"], sc.logs["munged"]
	childproc.Start(t, munge)
	sc.WaitFor("munged's socket", 20*time.Second, func() bool { _, err := os.Stat(socket); return err == nil })

	// The slurm configuration of rackpool, and what `rackpool slurm
	// config` makes of it.
	var nodes strings.Builder
	for _, n := range o.Nodes {
		fmt.Fprintf(&nodes, "  %s: {host: %s, hostname: localhost, addr: 127.0.0.1, port: %s, cpus: 1, memory_mib: 100}\n", n[0], n[1], freePort(t))
		if err := os.MkdirAll(filepath.Join(dir, "spool", n[0]), 0o700); err != nil {
			t.Fatalf("%v", err)
		}
	}
	cfg := filepath.Join(dir, "etc", "rackpool-slurm.yaml")
	write(t, cfg, "nodes:\n"+nodes.String()+"templates:\n"+o.Templates)
	envFile := filepath.Join(dir, "etc", "slurm.env")
	write(t, envFile, fmt.Sprintf("RACKPOOL_URL=%s\nRACKPOOL_USER=%s\nRACKPOOL_PASSWORD=%s\nRACKPOOL_CA_FILE=%s\nSLURM_CONF=%s\n",
		o.URL, o.User, o.Password, o.CAFile, sc.conf))
	out, err := childproc.Command(o.Binary, "slurm", "config", "--config", cfg, "--out", filepath.Join(dir, "etc"), "--env-file", envFile,
		"--log", filepath.Join(dir, "log", "power.log"), "--suspend-time", o.SuspendTime, "--resume-timeout", "60s", "--suspend-timeout", "10s",
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
	sc.logs["slurmctld"] = &buffer{}
	sc.StartCtld()

	// The machines: a node's slurmd runs while its system is powered On.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	hc, err := api.HTTPClient(o.CAFile)
	if err != nil {
		t.Fatalf("%v", err)
	}
	c := &api.Client{URL: o.URL, User: o.User, Password: o.Password, HTTP: hc}
	go func() { defer close(done); sc.playMachines(ctx, c) }()
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
				out, _ := sc.Run(args[0], args[1:]...)
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
func (sc *Cluster) playMachines(ctx context.Context, c *api.Client) {
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
		for _, n := range sc.nodes {
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

// Run runs a Slurm command (sinfo, scontrol ...) against the cluster.
func (sc *Cluster) Run(name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Env = sc.env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// WaitFor polls ok until it holds and says how long that took; after
// timeout it fails with what.
func (sc *Cluster) WaitFor(what string, timeout time.Duration, ok func() bool) time.Duration {
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

// Job reads a field of a job (`scontrol show job -o`).
func (sc *Cluster) Job(id, field string) string {
	out, err := sc.Run("scontrol", "show", "job", "-o", id)
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

// Sbatch submits a job to partition main and returns its ID.
func (sc *Cluster) Sbatch(args ...string) string {
	sc.t.Helper()
	out, err := sc.Run("sbatch", append([]string{"--parsable", "-p", "main", "-o", filepath.Join(sc.dir, "log", "job-%j.out")}, args...)...)
	if err != nil {
		sc.t.Fatalf("sbatch %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(out)
}
