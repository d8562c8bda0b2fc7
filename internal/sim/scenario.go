package sim

// This file loads scenario files: YAML that overlays Defaults() with the
// values it names, plus an optional parameter sweep. The top-level keys
// are the names FieldError uses (hosts, cards_per_tray, ...); workload
// settings sit under workload: and metrics settings under metrics:.
//
//	name: monet-5a
//	architecture: pod
//	planes: 3
//	workload:
//	  kind: monet
//	  requests: 1000
//	metrics:
//	  unit_cost: {gpus: 4}
//	sweep:
//	  planes: [12, 16, 20, 24]
//	  load: [0.5, 1, 2]
//
// Parsing is strict: unknown keys, keys given twice and values of the
// wrong type are errors, and every error names the file, the line and the
// key:
//
//	scenario.yaml:12: workload.requests: must be between 1 and 100,000,000, got 0

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"rackpool/internal/schedule"
)

// Scenario is a loaded scenario file.
type Scenario struct {
	Config Config // Defaults() overlaid with the file's values, validated
	Sweep  *Sweep // nil when the file has no sweep section
}

// Sweep is a parameter sweep: every combination of its axes' values is
// one run.
type Sweep struct {
	Axes []SweepAxis // in file order
}

// SweepAxis is one swept parameter (one of SweepParams) and its values.
type SweepAxis struct {
	Name   string
	Values []float64
}

// Sweep limits.
const (
	MaxSweepValues = 1000    // values per axis
	MaxSweepPoints = 100_000 // points in all
)

// SweepParams are the parameters a sweep may vary, by their scenario
// names. The workload knobs (load, requests, mean_interarrival, nodes)
// set Config.Workload.
var SweepParams = []string{
	"hosts", "host_cores", "host_ram_gb",
	"racks", "cpu_cards_per_rack", "memory_nodes_per_rack", "memory_node_gb", "gpus_per_rack", "nvme_per_rack",
	"trays", "cards_per_tray", "planes", "card_ports",
	"load", "requests", "mean_interarrival", "nodes",
	"seed",
}

// sweepWorkloadParams are the SweepParams that live in the workload section.
var sweepWorkloadParams = []string{"load", "requests", "mean_interarrival", "nodes"}

// Points returns every combination of the axes' values, each a map from
// parameter name to value. The order is deterministic: the first axis
// varies slowest, the last fastest. A nil sweep has no points.
func (s *Sweep) Points() []map[string]float64 {
	if s == nil || len(s.Axes) == 0 {
		return nil
	}
	n := 1
	for _, a := range s.Axes {
		n *= len(a.Values)
	}
	points := make([]map[string]float64, 0, n)
	idx := make([]int, len(s.Axes))
	for range n {
		p := make(map[string]float64, len(s.Axes))
		for i, a := range s.Axes {
			p[a.Name] = a.Values[idx[i]]
		}
		points = append(points, p)
		for i := len(idx) - 1; i >= 0; i-- {
			idx[i]++
			if idx[i] < len(s.Axes[i].Values) {
				break
			}
			idx[i] = 0
		}
	}
	return points
}

// ApplyParam sets the sweep parameter name (one of SweepParams) to v in
// c; callers pass a copy of the base configuration and call Validate once
// every parameter of a point is set. It checks only that name is known and
// that an integer parameter gets an integer.
func ApplyParam(c *Config, name string, v float64) error {
	switch name {
	case "load":
		c.Workload.Load = v
		return nil
	case "mean_interarrival":
		c.Workload.MeanInterarrival = v
		return nil
	case "seed":
		n, err := paramInt(v)
		if err != nil {
			return fmt.Errorf("sim: parameter seed: %w", err)
		}
		c.Seed = n
		return nil
	}
	p := sweepIntParam(c, name)
	if p == nil {
		return fmt.Errorf("sim: unknown sweep parameter %q (valid: %s)", name, strings.Join(SweepParams, ", "))
	}
	n, err := paramInt(v)
	if err != nil {
		return fmt.Errorf("sim: parameter %s: %w", name, err)
	}
	*p = int(n)
	return nil
}

// sweepIntParam returns the field of c that the integer sweep parameter name
// sets, or nil.
func sweepIntParam(c *Config, name string) *int {
	switch name {
	case "hosts":
		return &c.Hosts
	case "host_cores":
		return &c.HostCores
	case "host_ram_gb":
		return &c.HostRAMGB
	case "racks":
		return &c.Racks
	case "cpu_cards_per_rack":
		return &c.CPUCardsPerRack
	case "memory_nodes_per_rack":
		return &c.MemoryNodesPerRack
	case "memory_node_gb":
		return &c.MemoryNodeGB
	case "gpus_per_rack":
		return &c.GPUsPerRack
	case "nvme_per_rack":
		return &c.NVMePerRack
	case "trays":
		return &c.Trays
	case "cards_per_tray":
		return &c.CardsPerTray
	case "planes":
		return &c.Planes
	case "card_ports":
		return &c.CardPorts
	case "requests":
		return &c.Workload.Requests
	case "nodes":
		return &c.Workload.Nodes
	}
	return nil
}

// paramInt returns v as an integer, or an error when it is not one.
func paramInt(v float64) (int64, error) {
	if v != math.Trunc(v) || math.IsInf(v, 0) || v < math.MinInt64 || v >= math.MaxInt64 {
		return 0, fmt.Errorf("want an integer, got %s", traceNum(v))
	}
	return int64(v), nil
}

// LoadScenario reads and validates the scenario file at path. A trace
// named in it is relative to the file's directory.
func LoadScenario(path string) (*Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("sim: read scenario: %w", err)
	}
	return ParseScenario(path, data, filepath.Dir(path))
}

// ParseScenario validates data, read from the file name, into a Scenario.
// A relative workload trace is taken relative to baseDir and stored in
// Config.Workload.Trace joined to it; for a trace workload the file must
// exist (it is not read here). Every point of the sweep is validated too.
func ParseScenario(name string, data []byte, baseDir string) (*Scenario, error) {
	p := &scenarioParser{file: name, lines: map[string]int{}}
	sc := &Scenario{Config: Defaults()}
	c := &sc.Config
	sweepNode, err := p.decode(data, c)
	if err != nil {
		return nil, err
	}
	if sweepNode != nil {
		if sc.Sweep, err = p.sweep(sweepNode); err != nil {
			return nil, err
		}
	}
	for _, t := range []*string{&c.Workload.Trace, &c.Workload.DemandTrace} {
		if *t != "" && !filepath.IsAbs(*t) {
			*t = filepath.Join(baseDir, *t)
		}
		if *t != "" {
			*t = filepath.Clean(*t)
		}
	}
	if err := c.Validate(); err != nil {
		return nil, p.validationError(err, "", nil)
	}
	if c.Workload.Kind == WorkloadTrace {
		if err := checkTraceReadable(c.Workload.Trace); err != nil {
			return nil, p.errf(p.lines["workload.trace"], "workload.trace", "%v", err)
		}
	}
	if sc.Sweep != nil {
		if err := p.checkPoints(sc.Sweep, c); err != nil {
			return nil, err
		}
	}
	return sc, nil
}

// decode overlays c with the settings in data, without validating them;
// it returns the sweep section, if any, for later.
func (p *scenarioParser) decode(data []byte, c *Config) (*yaml.Node, error) {
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		if err == io.EOF {
			return nil, &LineError{File: p.file, Line: 1, Msg: "empty scenario (want a mapping of settings)"}
		}
		return nil, scenarioYAMLError(p.file, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err != io.EOF {
		if err != nil {
			return nil, scenarioYAMLError(p.file, err)
		}
		return nil, &LineError{File: p.file, Line: extra.Line, Msg: "a scenario file holds one YAML document"}
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	c.UnitCost = maps.Clone(c.UnitCost)
	var sweep *yaml.Node
	if err := p.top(root, c, &sweep); err != nil {
		return nil, err
	}
	return sweep, nil
}

// checkTraceReadable opens the file at path, without reading it.
func checkTraceReadable(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if st.IsDir() {
		return fmt.Errorf("%s is a directory, not a trace file", path)
	}
	return nil
}

var scenarioYAMLLine = regexp.MustCompile(`line (\d+): (.*)`)

// scenarioYAMLError turns a YAML syntax error into a LineError.
func scenarioYAMLError(name string, err error) error {
	msg := err.Error()
	var te *yaml.TypeError
	if errors.As(err, &te) && len(te.Errors) > 0 {
		msg = te.Errors[0]
	}
	if m := scenarioYAMLLine.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		return &LineError{File: name, Line: line, Msg: "yaml: " + m[2]}
	}
	return &LineError{File: name, Line: 1, Msg: strings.TrimPrefix(msg, "yaml: ")}
}

// scenarioParser holds the state of one ParseScenario.
type scenarioParser struct {
	file string
	// lines maps each key's path in the file ("workload.requests",
	// "metrics.unit_cost.gpus", "sweep.planes") to its line.
	lines map[string]int
}

func (p *scenarioParser) errf(line int, field, format string, args ...any) error {
	return &LineError{File: p.file, Line: line, Field: field, Msg: fmt.Sprintf(format, args...)}
}

// scenarioKey is one key of a section: its name and where its value goes
// (*int, *int64, *float64, *string, *schedule.Policy, *[]float64, or nil
// for a subsection handled by the caller).
type scenarioKey struct {
	name string
	dst  any
}

func scenarioTopKeys(c *Config) []scenarioKey {
	return []scenarioKey{
		{"name", &c.Name}, {"seed", &c.Seed}, {"architecture", &c.Architecture}, {"network", &c.Network},
		{"policy", &c.Policy},
		{"hosts", &c.Hosts}, {"host_cores", &c.HostCores}, {"host_ram_gb", &c.HostRAMGB}, {"hosts_per_rack", &c.HostsPerRack},
		{"racks", &c.Racks}, {"cpu_cards_per_rack", &c.CPUCardsPerRack}, {"card_cores", &c.CardCores},
		{"memory_nodes_per_rack", &c.MemoryNodesPerRack}, {"memory_node_gb", &c.MemoryNodeGB},
		{"memory_block_gb", &c.MemoryBlockGB}, {"gpus_per_rack", &c.GPUsPerRack}, {"nvme_per_rack", &c.NVMePerRack},
		{"nvme_gb", &c.NVMeGB}, {"card_ports", &c.CardPorts}, {"switch_latency_ns", &c.SwitchLatencyNS},
		{"read_overhead_ns", &c.ReadOverheadNS}, {"port_power_w", &c.PortPowerW},
		{"intra_link_metres", &c.IntraLinkMetres}, {"inter_link_metres", &c.InterLinkMetres},
		{"inter_rack_link_metres", &c.InterRackLinkMetres},
		{"trays", &c.Trays}, {"cards_per_tray", &c.CardsPerTray}, {"planes", &c.Planes},
		{"workload", nil}, {"metrics", nil}, {"sweep", nil},
	}
}

func scenarioWorkloadKeys(w *Workload) []scenarioKey {
	return []scenarioKey{
		{"kind", &w.Kind}, {"requests", &w.Requests}, {"mean_interarrival", &w.MeanInterarrival}, {"load", &w.Load},
		{"hold_base", &w.HoldBase}, {"hold_step", &w.HoldStep}, {"hold_every", &w.HoldEvery},
		{"cores_min", &w.CoresMin}, {"cores_max", &w.CoresMax}, {"ram_gb", &w.RAMGB},
		{"latency_min_ns", &w.LatencyMinNS}, {"latency_max_ns", &w.LatencyMaxNS}, {"bandwidth_gbps", &w.BandwidthGbps},
		{"trace", &w.Trace},
		{"nodes", &w.Nodes}, {"steps", &w.Steps}, {"step_length", &w.StepLength}, {"node_avg_gb", &w.NodeAvgGB},
		{"node_peak_to_average", &w.NodePeakToAverage}, {"aggregate_peak_to_average", &w.AggPeakToAverage},
		{"demand_trace", &w.DemandTrace}, {"provisioning", &w.Provisioning},
	}
}

func scenarioMetricsKeys(c *Config) []scenarioKey {
	return []scenarioKey{
		{"sample_every", &c.SampleEvery}, {"mfp", &c.MFP}, {"local_ns", &c.LocalNS},
		{"unit_cost", nil},
	}
}

// scenarioMetricsFields are the FieldError names that live in the metrics section.
var scenarioMetricsFields = []string{"sample_every", "mfp", "local_ns", "unit_cost"}

// top decodes the top-level mapping into c; the sweep section is returned
// in sweep for later.
func (p *scenarioParser) top(root *yaml.Node, c *Config, sweep **yaml.Node) error {
	return p.mapping(root, "", scenarioTopKeys(c), func(key string, v *yaml.Node) error {
		switch key {
		case "workload":
			return p.mapping(v, "workload", scenarioWorkloadKeys(&c.Workload), nil)
		case "metrics":
			return p.mapping(v, "metrics", scenarioMetricsKeys(c), func(_ string, v *yaml.Node) error {
				return p.unitCost(v, c.UnitCost)
			})
		case "sweep":
			*sweep = v
		}
		return nil
	})
}

// mapping decodes the mapping n (the section path, "" at the top) by
// keys; sub is called for the keys without a destination.
func (p *scenarioParser) mapping(n *yaml.Node, path string, keys []scenarioKey, sub func(key string, v *yaml.Node) error) error {
	n = yamlDeref(n)
	if n.Kind != yaml.MappingNode {
		if path == "" {
			return p.errf(n.Line, "", "a scenario is a mapping of settings, got %s", describeNode(n))
		}
		return p.errf(n.Line, path, "want a mapping, got %s", describeNode(n))
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := yamlDeref(n.Content[i]), n.Content[i+1]
		field := keyPath(path, k.Value)
		idx := slices.IndexFunc(keys, func(s scenarioKey) bool { return s.name == k.Value })
		if k.Kind != yaml.ScalarNode || idx < 0 {
			names := make([]string, len(keys))
			for j, s := range keys {
				names[j] = s.name
			}
			slices.Sort(names)
			return p.errf(k.Line, path, "unknown key %q (valid: %s)", k.Value, strings.Join(names, ", "))
		}
		if seen[k.Value] {
			return p.errf(k.Line, field, "given twice (first on line %d)", p.lines[field])
		}
		seen[k.Value] = true
		p.lines[field] = k.Line
		var err error
		if keys[idx].dst == nil {
			err = sub(k.Value, v)
		} else {
			err = p.value(v, field, keys[idx].dst)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// unitCost overlays the metrics.unit_cost mapping on costs.
func (p *scenarioParser) unitCost(n *yaml.Node, costs map[string]float64) error {
	const path = "metrics.unit_cost"
	n = yamlDeref(n)
	if n.Kind != yaml.MappingNode {
		return p.errf(n.Line, path, "want a mapping of resource type to cost, got %s", describeNode(n))
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := yamlDeref(n.Content[i]), n.Content[i+1]
		field := keyPath(path, k.Value)
		if k.Kind != yaml.ScalarNode || !slices.Contains(ResourceTypes, k.Value) {
			return p.errf(k.Line, path, "unknown resource type %q (valid: %s)", k.Value, strings.Join(ResourceTypes, ", "))
		}
		if l, dup := p.lines[field]; dup {
			return p.errf(k.Line, field, "given twice (first on line %d)", l)
		}
		p.lines[field] = k.Line
		f, err := p.float(v, field)
		if err != nil {
			return err
		}
		costs[k.Value] = f
	}
	return nil
}

// value decodes the scalar (or list) n into dst.
func (p *scenarioParser) value(n *yaml.Node, field string, dst any) error {
	n = yamlDeref(n)
	var err error
	switch d := dst.(type) {
	case *string:
		*d, err = p.str(n, field)
	case *schedule.Policy:
		var s string
		s, err = p.str(n, field)
		*d = schedule.Policy(s)
	case *float64:
		*d, err = p.float(n, field)
	case *int64:
		*d, err = p.int(n, field)
	case *int:
		var v int64
		v, err = p.int(n, field)
		*d = int(v)
	case *[]float64:
		if n.Kind != yaml.SequenceNode {
			return p.errf(n.Line, field, "want a list of numbers, got %s", describeNode(n))
		}
		list := make([]float64, len(n.Content))
		for i, e := range n.Content {
			if list[i], err = p.float(yamlDeref(e), fmt.Sprintf("%s[%d]", field, i)); err != nil {
				return err
			}
		}
		*d = list
	default:
		return fmt.Errorf("sim: scenario key %s has no decoder for %T", field, dst)
	}
	return err
}

func (p *scenarioParser) str(n *yaml.Node, field string) (string, error) {
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		return "", p.errf(n.Line, field, "want a string, got %s", describeNode(n))
	}
	return n.Value, nil
}

func (p *scenarioParser) float(n *yaml.Node, field string) (float64, error) {
	n = yamlDeref(n)
	if n.Kind != yaml.ScalarNode || (n.Tag != "!!int" && n.Tag != "!!float") {
		return 0, p.errf(n.Line, field, "want a number, got %s", describeNode(n))
	}
	var v float64
	if err := n.Decode(&v); err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, p.errf(n.Line, field, "want a finite number, got %q", n.Value)
	}
	return v, nil
}

func (p *scenarioParser) int(n *yaml.Node, field string) (int64, error) {
	n = yamlDeref(n)
	if n.Kind == yaml.ScalarNode {
		switch n.Tag {
		case "!!int":
			var v int64
			if err := n.Decode(&v); err == nil {
				return v, nil
			}
		case "!!float":
			var f float64
			if err := n.Decode(&f); err == nil {
				if v, err := paramInt(f); err == nil {
					return v, nil
				}
			}
		}
	}
	return 0, p.errf(n.Line, field, "want an integer, got %s", describeNode(n))
}

// sweep decodes the sweep section.
func (p *scenarioParser) sweep(n *yaml.Node) (*Sweep, error) {
	n = yamlDeref(n)
	if n.Kind != yaml.MappingNode {
		return nil, p.errf(n.Line, "sweep", "want a mapping of parameter to values, got %s", describeNode(n))
	}
	if len(n.Content) == 0 {
		return nil, p.errf(n.Line, "sweep", "no parameters to sweep (valid: %s)", strings.Join(SweepParams, ", "))
	}
	sw := &Sweep{}
	points := 1
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := yamlDeref(n.Content[i]), yamlDeref(n.Content[i+1])
		field := keyPath("sweep", k.Value)
		if k.Kind != yaml.ScalarNode || !slices.Contains(SweepParams, k.Value) {
			return nil, p.errf(k.Line, "sweep", "unknown parameter %q (valid: %s)", k.Value, strings.Join(SweepParams, ", "))
		}
		if l, dup := p.lines[field]; dup {
			return nil, p.errf(k.Line, field, "given twice (first on line %d)", l)
		}
		p.lines[field] = k.Line
		if v.Kind != yaml.SequenceNode {
			return nil, p.errf(v.Line, field, "want a list of values, got %s", describeNode(v))
		}
		if len(v.Content) < 1 || len(v.Content) > MaxSweepValues {
			return nil, p.errf(k.Line, field, "needs 1 to %d values, got %d", MaxSweepValues, len(v.Content))
		}
		isInt := k.Value == "seed" || sweepIntParam(&Config{}, k.Value) != nil
		axis := SweepAxis{Name: k.Value, Values: make([]float64, len(v.Content))}
		for j, e := range v.Content {
			ef := fmt.Sprintf("%s[%d]", field, j)
			var err error
			if isInt {
				var iv int64
				iv, err = p.int(e, ef)
				axis.Values[j] = float64(iv)
				if err == nil && (iv > 1<<53 || iv < -(1<<53)) {
					err = p.errf(yamlDeref(e).Line, ef, "%d is too large to sweep exactly (at most 2^53)", iv)
				}
			} else {
				axis.Values[j], err = p.float(e, ef)
			}
			if err != nil {
				return nil, err
			}
			if prev := slices.Index(axis.Values[:j], axis.Values[j]); prev >= 0 {
				return nil, p.errf(yamlDeref(e).Line, ef, "value %s given twice (also %s[%d])", traceNum(axis.Values[j]), field, prev)
			}
		}
		points *= len(axis.Values)
		if points > MaxSweepPoints {
			return nil, p.errf(p.lines["sweep"], "sweep", "more than %d points (the product of the axes' value counts)", MaxSweepPoints)
		}
		sw.Axes = append(sw.Axes, axis)
	}
	return sw, nil
}

// checkPoints validates base with every point of sw applied, naming the
// first point that fails.
func (p *scenarioParser) checkPoints(sw *Sweep, base *Config) error {
	for _, pt := range sw.Points() {
		c := *base
		var desc strings.Builder
		for _, a := range sw.Axes {
			if err := ApplyParam(&c, a.Name, pt[a.Name]); err != nil {
				return p.errf(p.lines[keyPath("sweep", a.Name)], keyPath("sweep", a.Name), "%v", err)
			}
			fmt.Fprintf(&desc, " %s=%s", a.Name, traceNum(pt[a.Name]))
		}
		if err := c.Validate(); err != nil {
			return p.validationError(err, "point"+desc.String(), sw)
		}
	}
	return nil
}

// scenarioRelated are keys whose line names a validation error when the
// key Validate names is not in the file (its value is a default) but a
// key its check involves is.
var scenarioRelated = map[string][]string{
	"workload.hold_base":                 {"workload.hold_step", "workload.hold_every"},
	"workload.cores_min":                 {"workload.cores_max"},
	"workload.latency_min_ns":            {"workload.latency_max_ns"},
	"workload.nodes":                     {"workload.steps", "workload.step_length", "workload.node_avg_gb"},
	"workload.aggregate_peak_to_average": {"workload.node_peak_to_average"},
	"workload.trace":                     {"workload.kind"},
	"workload.requests":                  {"workload.kind"},
	"gpus_per_rack":                      {"nvme_per_rack", "nvme_gb"},
	"memory_block_gb":                    {"memory_node_gb"},
	"trays":                              {"cards_per_tray"},
	"racks":                              {"cpu_cards_per_rack", "memory_nodes_per_rack", "gpus_per_rack", "nvme_per_rack"},
	"network":                            {"architecture"},
}

// scenarioPath returns the path in the file of the FieldError name field:
// metrics settings live under metrics:.
func scenarioPath(field string) string {
	head, _, _ := strings.Cut(field, ".")
	if slices.Contains(scenarioMetricsFields, head) {
		return "metrics." + field
	}
	return field
}

// validationError places an error of Config.Validate at its key's line.
// For a sweep point (point describes it, sw is the sweep) the line is that
// of the swept key the error is about, or of the sweep section.
func (p *scenarioParser) validationError(err error, point string, sw *Sweep) error {
	var fe *FieldError
	if !errors.As(err, &fe) {
		return &LineError{File: p.file, Line: 1, Msg: err.Error()}
	}
	field := scenarioPath(fe.Field)
	if sw != nil {
		line := p.lines["sweep"]
		for _, f := range append([]string{fe.Field}, scenarioRelated[fe.Field]...) {
			if l, ok := p.lines[keyPath("sweep", strings.TrimPrefix(f, "workload."))]; ok && sweepField(f) {
				line = l
				break
			}
		}
		return p.errf(line, "sweep", "%s: %s: %s", point, field, fe.Msg)
	}
	if line, ok := p.lines[field]; ok {
		return p.errf(line, field, "%s", fe.Msg)
	}
	for _, r := range scenarioRelated[fe.Field] {
		if line, ok := p.lines[r]; ok {
			return p.errf(line, field, "%s", fe.Msg)
		}
	}
	return p.errf(1, field, "%s (default)", fe.Msg)
}

// sweepField reports whether the FieldError name field is a sweep
// parameter's.
func sweepField(field string) bool {
	if name, ok := strings.CutPrefix(field, "workload."); ok {
		return slices.Contains(sweepWorkloadParams, name)
	}
	return slices.Contains(SweepParams, field) && !slices.Contains(sweepWorkloadParams, field)
}

// yamlDeref follows YAML aliases.
func yamlDeref(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

// describeNode names what a node holds, for "want X, got Y" messages.
func describeNode(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return "nothing"
		}
		return strconv.Quote(n.Value)
	}
	return "nothing"
}

func keyPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
