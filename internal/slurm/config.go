// Package slurm composes the nodes Slurm's power saving resumes
// (docs/slurm.md): `rackpool slurm resume|suspend|resume-fail`, run by
// slurmctld as its ResumeProgram, SuspendProgram and ResumeFailProgram,
// compose a node's features onto its rackpool host through the one compose
// engine, power it on and boot it, and take it apart after idle;
// `rackpool slurm config` writes the slurm.conf lines that tell Slurm what
// each node can be composed into.
package slurm

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"rackpool/api"
)

// Config is the slurm configuration file: which rackpool host each Slurm
// node is, and what each composable feature composes.
//
//	nodes:                  # Slurm node name: its rackpool host (addr and
//	  n1: {host: host1}     # port: slurmd's, when not the node's name and
//	  n2: {host: host2}     # the default port)
//	templates:              # a node feature: what is composed for it
//	  gpu2: {needs: ["2 gpu"], affinity: same-drawer}
//	  nvme: {needs: ["1 nvme"]}
//	  mem512: {needs: ["512GiB memory"]}
type Config struct {
	Nodes     map[string]*Node     `yaml:"nodes"`
	Templates map[string]*Template `yaml:"templates"`
	// KeepWarm, when set, lets a suspend keep a node composed where its
	// features are forecast to be wanted again (KeepWarm).
	KeepWarm *KeepWarm `yaml:"keep_warm"`
}

// Node is a Slurm node: the rackpool host it is, where its slurmd listens
// (NodeAddr and Port in slurm.conf; defaults when empty), and its CPUs and
// memory when they are not the topology's host's (0: the topology's).
type Node struct {
	Host      string `yaml:"host"`
	Hostname  string `yaml:"hostname"` // NodeHostname, when not the node's name
	Addr      string `yaml:"addr"`
	Port      int    `yaml:"port"`
	CPUs      int    `yaml:"cpus"`
	MemoryMiB int    `yaml:"memory_mib"`
}

// Template is what one feature composes onto a node's host.
type Template struct {
	// Needs in the CLI's syntax (api.ParseNeed): "2 gpu model=V100",
	// "512GiB memory".
	Needs []string `yaml:"needs"`
	// Affinity is "", same-drawer or same-switch.
	Affinity string `yaml:"affinity"`

	needs []api.Need
}

// names are Slurm node and feature names: letters, digits, '-', '_', '.'.
var name = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// LoadConfig reads and checks a configuration file.
func LoadConfig(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("slurm config: %w", err)
	}
	return ParseConfig(path, data)
}

// ParseConfig reads a configuration (path names it in errors): unknown
// keys, nodes without a host, templates without needs, needs that do not
// parse and an unknown affinity are refused.
func ParseConfig(path string, data []byte) (*Config, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var c Config
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var errs []error
	if len(c.Nodes) == 0 {
		errs = append(errs, errors.New("nodes: none (map each Slurm node to its rackpool host)"))
	}
	for n, nd := range c.Nodes {
		switch {
		case !name.MatchString(n):
			errs = append(errs, fmt.Errorf("nodes: %q is not a Slurm node name", n))
		case nd == nil || nd.Host == "":
			errs = append(errs, fmt.Errorf("nodes: %s: no rackpool host", n))
		case nd.Port < 0 || nd.Port > 65535:
			errs = append(errs, fmt.Errorf("nodes: %s: port %d", n, nd.Port))
		case nd.CPUs < 0 || nd.MemoryMiB < 0:
			errs = append(errs, fmt.Errorf("nodes: %s: negative cpus or memory_mib", n))
		}
	}
	for f, t := range c.Templates {
		if !name.MatchString(f) {
			errs = append(errs, fmt.Errorf("templates: %q is not a Slurm feature name", f))
			continue
		}
		if t == nil || len(t.Needs) == 0 {
			errs = append(errs, fmt.Errorf("templates: %s: no needs", f))
			continue
		}
		switch t.Affinity {
		case "", "same-drawer", "same-switch":
		default:
			errs = append(errs, fmt.Errorf("templates: %s: affinity %q (use same-drawer or same-switch)", f, t.Affinity))
		}
		for _, s := range t.Needs {
			n, err := api.ParseNeed(s)
			if err != nil {
				errs = append(errs, fmt.Errorf("templates: %s: %w", f, err))
				continue
			}
			t.needs = append(t.needs, n)
		}
	}
	if c.KeepWarm != nil {
		if err := c.KeepWarm.validate(); err != nil {
			errs = append(errs, err)
		}
		c.KeepWarm.defaults()
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &c, nil
}

// Features are the configuration's features, sorted.
func (c *Config) Features() []string {
	return slices.Sorted(func(yield func(string) bool) {
		for f := range c.Templates {
			if !yield(f) {
				return
			}
		}
	})
}

// NodeNames are the configuration's nodes, sorted.
func (c *Config) NodeNames() []string {
	return slices.Sorted(func(yield func(string) bool) {
		for n := range c.Nodes {
			if !yield(n) {
				return
			}
		}
	})
}

// Request is the compose request of features on node: the host, and every
// feature's needs (one affinity: the first a feature names). Features that
// are no template (static ones, like a CPU type) compose nothing.
func (c *Config) Request(node string, features []string) (api.ComposeRequest, error) {
	nd, ok := c.Nodes[node]
	if !ok {
		return api.ComposeRequest{}, fmt.Errorf("node %s is not in the slurm config's nodes", node)
	}
	r := api.ComposeRequest{Name: SystemName(node, features), Host: nd.Host}
	for _, f := range features {
		t := c.Templates[f]
		if t == nil {
			continue
		}
		r.Needs = append(r.Needs, t.needs...)
		if r.Affinity == "" {
			r.Affinity = t.Affinity
		}
	}
	return r, nil
}

// SystemName is the name of node's composed system with features: the
// node first, so a node's system is found whatever it was composed for.
func SystemName(node string, features []string) string {
	if len(features) == 0 {
		return "slurm " + node
	}
	return "slurm " + node + " [" + strings.Join(features, " ") + "]"
}

// nodeOf is the Slurm node a system's name says it is for, "" for a
// system of no node.
func nodeOf(systemName string) string {
	rest, ok := strings.CutPrefix(systemName, "slurm ")
	if !ok {
		return ""
	}
	n, _, _ := strings.Cut(rest, " ")
	return n
}
