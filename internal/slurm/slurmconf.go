package slurm

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"rackpool/api"
	"rackpool/internal/inventory"
	"rackpool/internal/schedule"
	"rackpool/internal/topology"
	"rackpool/internal/units"
)

// Feasible are the features (templates) the one placement engine can
// compose onto node's host on the rack with nothing composed: what the
// node may be asked for. A template that fits no node is reported by
// Generate.
func (c *Config) Feasible(top *topology.Topology, node string) ([]string, error) {
	nd := c.Nodes[node]
	if nd == nil {
		return nil, fmt.Errorf("node %s is not in the slurm config's nodes", node)
	}
	if top.Host(nd.Host) == nil {
		return nil, fmt.Errorf("node %s: the topology has no host %q", node, nd.Host)
	}
	s := schedule.New(top)
	var out []string
	for _, f := range c.Features() {
		t := c.Templates[f]
		req := schedule.Request{Host: nd.Host, Affinity: schedule.Affinity(t.Affinity)}
		for _, n := range t.needs {
			sn, err := scheduleNeed(n)
			if err != nil {
				return nil, fmt.Errorf("templates: %s: %w", f, err)
			}
			req.Needs = append(req.Needs, sn)
		}
		if plan, err := s.Place(schedule.NewState(top), req); err == nil && plan != nil {
			out = append(out, f)
		}
	}
	return out, nil
}

func scheduleNeed(n api.Need) (schedule.Need, error) {
	sn := schedule.Need{Kind: inventory.Kind(n.Kind), Count: n.Count, Model: n.Model, Attrs: n.Attributes, MaxLatencyNS: n.MaxLatencyNS}
	if n.Capacity != "" {
		b, err := units.ParseBytes(n.Capacity)
		if err != nil {
			return sn, fmt.Errorf("capacity %q: %w", n.Capacity, err)
		}
		sn.CapacityBytes = b
	}
	return sn, nil
}

// ConfOptions are what Generate writes besides the nodes.
type ConfOptions struct {
	// Programs is the directory the power programs (wrappers of
	// `rackpool slurm`) are installed in.
	Programs string
	// Partition names the partition of the nodes ("rackpool" when empty).
	Partition string
	// SuspendTime is the idle time before a node is suspended (taken
	// apart); ResumeTimeout how long Slurm waits for a resumed node's
	// slurmd; SuspendTimeout for a suspend.
	SuspendTime, ResumeTimeout, SuspendTimeout time.Duration
}

// Generated is what `rackpool slurm config` writes: lines to include in
// slurm.conf, helpers.conf, and the notes (templates no node can take).
type Generated struct {
	SlurmConf, HelpersConf string
	Notes                  []string
}

// Generate writes the power-saving settings, a CLOUD NodeName line per node
// with the features its host can be composed into (Feature), its cores
// and memory from the topology, and the partition; helpers.conf declares
// every template a changeable feature.
func Generate(c *Config, top *topology.Topology, o ConfOptions) (*Generated, error) {
	if o.Partition == "" {
		o.Partition = "rackpool"
	}
	for _, d := range []*time.Duration{&o.SuspendTime, &o.ResumeTimeout, &o.SuspendTimeout} {
		if *d < 0 {
			return nil, fmt.Errorf("negative duration %v", *d)
		}
	}
	if o.SuspendTime == 0 {
		o.SuspendTime = 10 * time.Minute
	}
	if o.ResumeTimeout == 0 {
		o.ResumeTimeout = 10 * time.Minute
	}
	if o.SuspendTimeout == 0 {
		o.SuspendTimeout = 2 * time.Minute
	}
	secs := func(d time.Duration) int { return max(1, int((d+time.Second-1)/time.Second)) }
	var b strings.Builder
	fmt.Fprintf(&b, "# Written by rackpool slurm config (docs/slurm.md): the nodes rackpool composes on demand.\n")
	fmt.Fprintf(&b, "SuspendProgram=%s\n", filepath.Join(o.Programs, "rackpool-slurm-suspend"))
	fmt.Fprintf(&b, "ResumeProgram=%s\n", filepath.Join(o.Programs, "rackpool-slurm-resume"))
	fmt.Fprintf(&b, "ResumeFailProgram=%s\n", filepath.Join(o.Programs, "rackpool-slurm-resume-fail"))
	fmt.Fprintf(&b, "SuspendTime=%d\nResumeTimeout=%d\nSuspendTimeout=%d\n", secs(o.SuspendTime), secs(o.ResumeTimeout), secs(o.SuspendTimeout))
	fmt.Fprintf(&b, "NodeFeaturesPlugins=node_features/helpers\n")
	g := &Generated{}
	used := map[string]bool{}
	var names []string
	for _, n := range c.NodeNames() {
		feats, err := c.Feasible(top, n)
		if err != nil {
			return nil, err
		}
		nd := c.Nodes[n]
		h := top.Host(nd.Host)
		line := fmt.Sprintf("NodeName=%s", n)
		if nd.Hostname != "" {
			line += " NodeHostname=" + nd.Hostname
		}
		if nd.Addr != "" {
			line += " NodeAddr=" + nd.Addr
		}
		if nd.Port != 0 {
			line += fmt.Sprintf(" Port=%d", nd.Port)
		}
		cpus, mem := h.Cores, h.MemoryGiB*1024
		if nd.CPUs > 0 {
			cpus = nd.CPUs
		}
		if nd.MemoryMiB > 0 {
			mem = nd.MemoryMiB
		}
		line += fmt.Sprintf(" CPUs=%d RealMemory=%d State=CLOUD", max(1, cpus), max(1, mem))
		if len(feats) > 0 {
			line += " Feature=" + strings.Join(feats, ",")
		}
		fmt.Fprintln(&b, line)
		for _, f := range feats {
			used[f] = true
		}
		names = append(names, n)
	}
	fmt.Fprintf(&b, "PartitionName=%s Nodes=%s State=UP\n", o.Partition, strings.Join(names, ","))
	var helpers strings.Builder
	fmt.Fprintf(&helpers, "# Written by rackpool slurm config: every template a changeable feature, active\n")
	fmt.Fprintf(&helpers, "# when the node's composition was made for it (the helper asks rackpool).\n")
	for _, f := range c.Features() {
		if !used[f] {
			g.Notes = append(g.Notes, fmt.Sprintf("template %s fits no node's host: no node offers it", f))
			continue
		}
		fmt.Fprintf(&helpers, "Feature=%s Helper=%s\n", f, filepath.Join(o.Programs, "rackpool-slurm-features"))
	}
	g.SlurmConf, g.HelpersConf = b.String(), helpers.String()
	return g, nil
}

// Wrapper is a power program: a shell script that reads the control
// plane's address and credentials from envFile and runs `rackpool slurm
// VERB` with config, logging to logFile when it is not empty.
func Wrapper(rackpool, envFile, config, logFile, verb string) string {
	log := ""
	if logFile != "" { // errors before the log is open go there too
		log = " --log " + shellQuote(logFile) + " 2>>" + shellQuote(logFile)
	}
	return fmt.Sprintf(`#!/bin/sh
# Written by rackpool slurm config: slurmctld's %s program.
# slurmctld runs it with an empty environment.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
set -a
. %s
set +a
exec %s slurm %s --config %s "$@"%s
`, verb, shellQuote(envFile), shellQuote(rackpool), verb, shellQuote(config), log)
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// WriteFiles writes g and the three wrappers into dir.
func WriteFiles(dir string, g *Generated, rackpool, envFile, config, logFile string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	files := map[string]string{"slurm-rackpool.conf": g.SlurmConf, "helpers.conf": g.HelpersConf}
	for _, v := range []string{"resume", "suspend", "resume-fail", "features"} {
		files["rackpool-slurm-"+v] = Wrapper(rackpool, envFile, config, logFile, v)
	}
	for name, content := range files {
		mode := os.FileMode(0o644)
		if strings.HasPrefix(name, "rackpool-slurm-") {
			mode = 0o755
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), mode); err != nil {
			return err
		}
	}
	return nil
}
