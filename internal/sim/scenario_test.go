package sim

import (
	"fmt"
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"rackpool/internal/schedule"
)

// briefExample is the documented example: every key, and a sweep.
const briefExample = `name: monet-5a
seed: 7
architecture: pod            # traditional | rack | pod
network: monet               # monet | fat-tree
policy: rackpool             # first-fit | next-fit | best-fit | worst-fit | rackpool
hosts: 100                   # traditional
host_cores: 4
host_ram_gb: 16
hosts_per_rack: 40
racks: 10                    # rack
cpu_cards_per_rack: 16
card_cores: 4
memory_nodes_per_rack: 4
memory_node_gb: 64
memory_block_gb: 2
gpus_per_rack: 8
nvme_per_rack: 8
nvme_gb: 3840
card_ports: 3
switch_latency_ns: 25
read_overhead_ns: 37.4
port_power_w: 5
intra_link_metres: 0.25
inter_link_metres: 3
inter_rack_link_metres: 10
trays: 24                    # pod
cards_per_tray: 24
planes: 3
workload:
  kind: monet                # monet | trace | giraph
  requests: 1000
  mean_interarrival: 10
  load: 1
  hold_base: 6300
  hold_step: 360
  hold_every: 100
  cores_min: 1
  cores_max: 4
  ram_gb: [2, 4, 8, 16]
  latency_min_ns: 100
  latency_max_ns: 600
  bandwidth_gbps: [10, 25]
  trace: traces/x.csv        # relative to the scenario file's directory (baseDir); stored as a cleaned path
  nodes: 50
  steps: 200
  step_length: 60
  node_avg_gb: 32
  node_peak_to_average: 2.78
  aggregate_peak_to_average: 1.68
metrics:
  sample_every: 0
  mfp: 0.2
  local_ns: 75
  unit_cost: {cores: 1, memory_gb: 1, gpus: 4, storage_gb: 0.01}
sweep:
  planes: [12, 16, 20, 24]
  cards_per_tray: [8, 16, 24]
  load: [0.5, 1, 2]
`

func TestScenarioBriefExample(t *testing.T) {
	sc, err := ParseScenario("scenario.yaml", []byte(briefExample), "/base")
	if err != nil {
		t.Fatal(err)
	}
	want := Defaults()
	want.Name, want.Seed = "monet-5a", 7
	want.Workload.BandwidthGbps = []float64{10, 25}
	want.Workload.Trace = filepath.Clean("/base/traces/x.csv")
	want.UnitCost = map[string]float64{"cores": 1, "memory_gb": 1, "gpus": 4, "storage_gb": 0.01}
	if !reflect.DeepEqual(sc.Config, want) {
		t.Errorf("config\ngot  %+v\nwant %+v", sc.Config, want)
	}
	wantSweep := &Sweep{Axes: []SweepAxis{
		{"planes", []float64{12, 16, 20, 24}},
		{"cards_per_tray", []float64{8, 16, 24}},
		{"load", []float64{0.5, 1, 2}},
	}}
	if !reflect.DeepEqual(sc.Sweep, wantSweep) {
		t.Errorf("sweep %+v", sc.Sweep)
	}
	if n := len(sc.Sweep.Points()); n != 36 {
		t.Errorf("%d points", n)
	}
}

// fullScenario sets every key to a value other than its default.
const fullScenario = `name: full
seed: 99
architecture: rack
network: fat-tree
policy: worst-fit
hosts: 50
host_cores: 8
host_ram_gb: 32
hosts_per_rack: 20
racks: 5
cpu_cards_per_rack: 12
card_cores: 8
memory_nodes_per_rack: 6
memory_node_gb: 128
memory_block_gb: 4
gpus_per_rack: 2
nvme_per_rack: 3
nvme_gb: 1920
card_ports: 4
switch_latency_ns: 30
read_overhead_ns: 40.5
port_power_w: 3.5
intra_link_metres: 0.5
inter_link_metres: 4
inter_rack_link_metres: 20
trays: 12
cards_per_tray: 16
planes: 6
workload:
  kind: giraph
  requests: 500
  mean_interarrival: 5
  load: 1.5
  hold_base: 1000
  hold_step: 10
  hold_every: 50
  cores_min: 2
  cores_max: 8
  ram_gb:
    - 1
    - 3
  latency_min_ns: 50
  latency_max_ns: 900
  bandwidth_gbps: [40]
  trace: ./traces/../traces/x.csv
  nodes: 10
  steps: 20
  step_length: 30
  node_avg_gb: 16
  node_peak_to_average: 3
  aggregate_peak_to_average: 1.5
  demand_trace: traces/d.csv
  provisioning: predictive
metrics:
  sample_every: 5
  mfp: 0.3
  local_ns: 80
  unit_cost:
    gpus: 4
    storage_gb: 0.01
`

func TestScenarioEveryKey(t *testing.T) {
	sc, err := ParseScenario("full.yaml", []byte(fullScenario), "base")
	if err != nil {
		t.Fatal(err)
	}
	want := Config{
		Name: "full", Seed: 99, Architecture: RackPools, Network: FatTree, Policy: schedule.WorstFit,
		Hosts: 50, HostCores: 8, HostRAMGB: 32, HostsPerRack: 20,
		Racks: 5, CPUCardsPerRack: 12, CardCores: 8, MemoryNodesPerRack: 6, MemoryNodeGB: 128, MemoryBlockGB: 4,
		GPUsPerRack: 2, NVMePerRack: 3, NVMeGB: 1920, CardPorts: 4,
		SwitchLatencyNS: 30, ReadOverheadNS: 40.5, PortPowerW: 3.5,
		IntraLinkMetres: 0.5, InterLinkMetres: 4, InterRackLinkMetres: 20,
		Trays: 12, CardsPerTray: 16, Planes: 6,
		Workload: Workload{
			Kind: WorkloadGiraph, Requests: 500, MeanInterarrival: 5, Load: 1.5,
			HoldBase: 1000, HoldStep: 10, HoldEvery: 50, CoresMin: 2, CoresMax: 8,
			RAMGB: []float64{1, 3}, LatencyMinNS: 50, LatencyMaxNS: 900, BandwidthGbps: []float64{40},
			Trace: filepath.Join("base", "traces", "x.csv"),
			Nodes: 10, Steps: 20, StepLength: 30, NodeAvgGB: 16, NodePeakToAverage: 3, AggPeakToAverage: 1.5,
			DemandTrace: filepath.Join("base", "traces", "d.csv"), Provisioning: "predictive",
		},
		SampleEvery: 5, MFP: 0.3, LocalNS: 80,
		// unit_cost replaces the entries it names and keeps the others.
		UnitCost: map[string]float64{"cores": 1, "memory_gb": 1, "gpus": 4, "storage_gb": 0.01},
	}
	if !reflect.DeepEqual(sc.Config, want) {
		t.Errorf("config\ngot  %+v\nwant %+v", sc.Config, want)
	}
	if sc.Sweep != nil {
		t.Errorf("sweep %+v without a sweep section", sc.Sweep)
	}

	// Every field of Config and Workload has a key: the file above sets
	// them all to something other than the default.
	def := Defaults()
	for _, pair := range [][2]reflect.Value{
		{reflect.ValueOf(sc.Config), reflect.ValueOf(def)},
		{reflect.ValueOf(sc.Config.Workload), reflect.ValueOf(def.Workload)},
	} {
		for i := range pair[0].NumField() {
			name := pair[0].Type().Field(i).Name
			if name == "Workload" {
				continue
			}
			if reflect.DeepEqual(pair[0].Field(i).Interface(), pair[1].Field(i).Interface()) {
				t.Errorf("%s.%s is still the default: does it have a scenario key (scenario.go) and a value in fullScenario?",
					pair[0].Type().Name(), name)
			}
		}
	}
}

func TestScenarioDefaults(t *testing.T) {
	sc, err := ParseScenario("s.yaml", []byte("# only a name\nname: small\n"), "")
	if err != nil {
		t.Fatal(err)
	}
	want := Defaults()
	want.Name = "small"
	if !reflect.DeepEqual(sc.Config, want) {
		t.Errorf("got %+v", sc.Config)
	}
	// The loaded unit costs are the scenario's own map.
	sc.Config.UnitCost["gpus"] = 99
	if Defaults().UnitCost["gpus"] == 99 {
		t.Error("unit costs shared with Defaults")
	}
}

func TestScenarioErrors(t *testing.T) {
	many := func(n int) string {
		v := make([]string, n)
		for i := range v {
			v[i] = fmt.Sprint(i + 1)
		}
		return "[" + strings.Join(v, ", ") + "]"
	}
	cases := []struct {
		name, in, want string
	}{
		// Syntax and layout.
		{"empty file", "", `s.yaml:1: empty scenario`},
		{"only a comment", "# nothing\n", `s.yaml:1: empty scenario`},
		{"yaml syntax", "hosts: 1\nracks: [1,\n", `s.yaml:2: yaml: did not find expected node content`},
		{"tab indentation", "workload:\n\tkind: monet\n", `s.yaml:2: yaml: `},
		{"two documents", "hosts: 1\n---\nhosts: 2\n", `s.yaml:2: a scenario file holds one YAML document`},
		{"top level list", "- hosts\n", `s.yaml:1: a scenario is a mapping of settings, got a list`},
		{"unknown key", "name: x\nhostz: 3\n", `s.yaml:2: unknown key "hostz" (valid: architecture, `},
		{"unknown workload key", "workload:\n  kind: monet\n  bogus: 2\n", `s.yaml:3: workload: unknown key "bogus" (valid: aggregate_peak_to_average, bandwidth_gbps, `},
		{"unknown metrics key", "metrics:\n  cost: 2\n", `s.yaml:2: metrics: unknown key "cost" (valid: local_ns, mfp, sample_every, unit_cost)`},
		{"metrics key at top level", "mfp: 0.2\n", `s.yaml:1: unknown key "mfp"`},
		{"key twice", "hosts: 1\nracks: 2\nhosts: 2\n", `s.yaml:3: hosts: given twice (first on line 1)`},
		{"workload key twice", "workload:\n  load: 1\n  load: 2\n", `s.yaml:3: workload.load: given twice (first on line 2)`},
		{"section twice", "workload:\n  load: 1\nworkload:\n  load: 2\n", `s.yaml:3: workload: given twice (first on line 1)`},
		{"unit cost twice", "metrics:\n  unit_cost: {gpus: 1, gpus: 2}\n", `s.yaml:2: metrics.unit_cost.gpus: given twice (first on line 2)`},
		{"workload not a mapping", "workload: 3\n", `s.yaml:1: workload: want a mapping, got "3"`},
		{"metrics not a mapping", "metrics: [1]\n", `s.yaml:1: metrics: want a mapping, got a list`},

		// Types.
		{"string for integer", "hosts: abc\n", `s.yaml:1: hosts: want an integer, got "abc"`},
		{"quoted integer", "hosts: \"100\"\n", `s.yaml:1: hosts: want an integer, got "100"`},
		{"fraction for integer", "name: x\nplanes: 2.5\n", `s.yaml:2: planes: want an integer, got "2.5"`},
		{"bool for integer", "trays: yes\n", `s.yaml:1: trays: want an integer, got "yes"`},
		{"huge seed", "seed: 1e30\n", `s.yaml:1: seed: want an integer, got "1e30"`},
		{"overflowing integer", "hosts: 99999999999999999999\n", `s.yaml:1: hosts: want an integer, got "99999999999999999999"`},
		{"missing value", "hosts:\n", `s.yaml:1: hosts: want an integer, got nothing`},
		{"string for number", "switch_latency_ns: fast\n", `s.yaml:1: switch_latency_ns: want a number, got "fast"`},
		{"list for number", "switch_latency_ns: [1]\n", `s.yaml:1: switch_latency_ns: want a number, got a list`},
		{"nan", "port_power_w: .nan\n", `s.yaml:1: port_power_w: want a finite number, got ".nan"`},
		{"metrics number", "metrics:\n  mfp: high\n", `s.yaml:2: metrics.mfp: want a number, got "high"`},
		{"mapping for string", "name: {a: 1}\n", `s.yaml:1: name: want a string, got a mapping`},
		{"list element", "workload:\n  ram_gb: [2, x]\n", `s.yaml:2: workload.ram_gb[1]: want a number, got "x"`},
		{"list element in block list", "workload:\n  ram_gb:\n    - 2\n    - x\n", `s.yaml:4: workload.ram_gb[1]: want a number, got "x"`},
		{"scalar for list", "workload:\n  ram_gb: 4\n", `s.yaml:2: workload.ram_gb: want a list of numbers, got "4"`},
		{"unit cost not a mapping", "metrics:\n  unit_cost: 3\n", `s.yaml:2: metrics.unit_cost: want a mapping of resource type to cost, got "3"`},
		{"unknown resource type", "metrics:\n  unit_cost: {cpus: 1}\n", `s.yaml:2: metrics.unit_cost: unknown resource type "cpus" (valid: cores, memory_gb, gpus, storage_gb)`},
		{"unit cost not a number", "metrics:\n  unit_cost:\n    gpus: lots\n", `s.yaml:3: metrics.unit_cost.gpus: want a number, got "lots"`},

		// Config.Validate, placed at the key's line.
		{"unknown architecture", "name: x\narchitecture: mainframe\n", `s.yaml:2: architecture: unknown architecture "mainframe" (valid: traditional, rack, pod)`},
		{"unknown network", "network: torus\n", `s.yaml:1: network: unknown network "torus"`},
		{"unknown policy", "policy: random\n", `s.yaml:1: policy: unknown policy "random"`},
		{"zero requests", "workload:\n  kind: monet\n  requests: 0\n", `s.yaml:3: workload.requests: must be between 1 and 100,000,000, got 0`},
		{"odd cards per tray", "cards_per_tray: 7\n", `s.yaml:1: cards_per_tray: must be even (CPU:memory cards 1:1), got 7`},
		{"zero hosts", "architecture: traditional\nhosts: 0\n", `s.yaml:2: hosts: must be at least 1, got 0`},
		{"negative mfp", "metrics:\n  local_ns: 75\n  mfp: -1\n", `s.yaml:3: metrics.mfp: must be a finite number >= 0, got -1`},
		{"negative unit cost", "metrics:\n  unit_cost:\n    cores: 1\n    gpus: -1\n", `s.yaml:4: metrics.unit_cost.gpus: must be >= 0, got -1`},
		{"empty ram list", "workload:\n  ram_gb: []\n", `s.yaml:2: workload.ram_gb: needs at least one size`},
		// The named field is a default; the line is that of the key its
		// check involves.
		{"cores_max below default cores_min", "workload:\n  cores_max: 0\n", `s.yaml:2: workload.cores_min: need 1 <= cores_min <= cores_max, got 1..0`},
		{"block does not divide node", "memory_node_gb: 63\n", `s.yaml:1: memory_block_gb: 2 GB does not divide the 63 GB memory node`},
		{"trace workload without a trace", "name: x\nworkload:\n  kind: trace\n", `s.yaml:3: workload.trace: a trace workload needs a CSV file`},
		{"missing trace file", "workload:\n  kind: trace\n  trace: nope.csv\n", `s.yaml:3: workload.trace: open ` + filepath.Join("testdata", "nope.csv") + `: `},
		{"trace is a directory", "workload:\n  kind: trace\n  trace: traces\n", `s.yaml:3: workload.trace: ` + filepath.Join("testdata", "traces") + ` is a directory`},

		// Sweeps.
		{"sweep not a mapping", "sweep: [1, 2]\n", `s.yaml:1: sweep: want a mapping of parameter to values, got a list`},
		{"empty sweep", "sweep: {}\n", `s.yaml:1: sweep: no parameters to sweep`},
		{"unknown sweep parameter", "sweep:\n  planes: [1]\n  policy: [1]\n", `s.yaml:3: sweep: unknown parameter "policy" (valid: hosts, `},
		{"sweep parameter twice", "sweep:\n  planes: [1]\n  planes: [2]\n", `s.yaml:3: sweep.planes: given twice (first on line 2)`},
		{"sweep values not a list", "sweep:\n  planes: 4\n", `s.yaml:2: sweep.planes: want a list of values, got "4"`},
		{"sweep no values", "sweep:\n  planes: []\n", `s.yaml:2: sweep.planes: needs 1 to 1000 values, got 0`},
		{"sweep too many values", "sweep:\n  seed: " + many(1001) + "\n", `s.yaml:2: sweep.seed: needs 1 to 1000 values, got 1001`},
		{"sweep too many points", "sweep:\n  seed: " + many(1000) + "\n  planes: " + many(101) + "\n", `s.yaml:1: sweep: more than 100000 points`},
		{"sweep fraction for integer", "sweep:\n  planes:\n    - 2\n    - 2.5\n", `s.yaml:4: sweep.planes[1]: want an integer, got "2.5"`},
		{"sweep string value", "sweep:\n  load: [1, lots]\n", `s.yaml:2: sweep.load[1]: want a number, got "lots"`},
		{"sweep value twice", "sweep:\n  load: [1, 2, 1]\n", `s.yaml:2: sweep.load[2]: value 1 given twice (also sweep.load[0])`},
		{"sweep bad point", "name: x\nsweep:\n  planes: [12]\n  cards_per_tray: [8, 7]\n",
			`s.yaml:4: sweep: point planes=12 cards_per_tray=7: cards_per_tray: must be even (CPU:memory cards 1:1), got 7`},
		{"sweep bad workload point", "sweep:\n  planes: [1]\n  load: [1, 0]\n",
			`s.yaml:3: sweep: point planes=1 load=0: workload.load: must be > 0, got 0`},
		{"sweep bad point on a related key", "sweep:\n  load: [1]\n  cards_per_tray: [10000]\n",
			`s.yaml:3: sweep: point load=1 cards_per_tray=10000: trays: at most 200,000 cards in all, got 240000`},
		{"sweep bad point on another key", "architecture: traditional\nsweep:\n  seed: [1]\n  planes: [0]\n  hosts: [0]\n",
			`s.yaml:5: sweep: point seed=1 planes=0 hosts=0: hosts: must be at least 1, got 0`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseScenario("s.yaml", []byte(tc.in), "testdata")
			if err == nil {
				t.Fatalf("no error; want %q", tc.want)
			}
			if !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("error %q\nwant prefix %q", err, tc.want)
			}
		})
	}
}

func TestScenarioDefaultField(t *testing.T) {
	// A Validate error about a key the file does not set, with no related
	// key in the file either, is placed at line 1.
	p := &scenarioParser{file: "s.yaml", lines: map[string]int{"name": 3}}
	err := p.validationError(&FieldError{Field: "trays", Msg: "too many"}, "", nil)
	if want := "s.yaml:1: trays: too many (default)"; err.Error() != want {
		t.Errorf("got %q, want %q", err, want)
	}
	err = p.validationError(&FieldError{Field: "unit_cost.gpus", Msg: "bad"}, "", nil)
	if want := "s.yaml:1: metrics.unit_cost.gpus: bad (default)"; err.Error() != want {
		t.Errorf("got %q, want %q", err, want)
	}
}

func TestScenarioSweepPoints(t *testing.T) {
	sw := &Sweep{Axes: []SweepAxis{{"planes", []float64{1, 2}}, {"load", []float64{0.5, 1, 2}}}}
	var got []string
	for _, p := range sw.Points() {
		got = append(got, fmt.Sprintf("%v/%v", p["planes"], p["load"]))
	}
	want := "1/0.5 1/1 1/2 2/0.5 2/1 2/2"
	if strings.Join(got, " ") != want {
		t.Errorf("points %v, want %s", got, want)
	}
	if (*Sweep)(nil).Points() != nil {
		t.Error("a nil sweep has points")
	}
	one := &Sweep{Axes: []SweepAxis{{"seed", []float64{3}}}}
	if pts := one.Points(); len(pts) != 1 || !maps.Equal(pts[0], map[string]float64{"seed": 3}) {
		t.Errorf("one point: %v", pts)
	}
}

func TestScenarioApplyParam(t *testing.T) {
	for i, name := range SweepParams {
		c := Defaults()
		v := float64(1000 + i)
		if err := ApplyParam(&c, name, v); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		// The parameter lands in the field the scenario key of the same
		// name sets.
		src := name + ": " + fmt.Sprint(v)
		if slices.Contains(sweepWorkloadParams, name) {
			src = "workload:\n  " + src
		}
		want, err := parseNoValidate(src)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !reflect.DeepEqual(c, *want) {
			t.Errorf("ApplyParam(%s) set a different field than the scenario key", name)
		}
	}
	c := Defaults()
	if err := ApplyParam(&c, "planes", 2.5); err == nil || !strings.Contains(err.Error(), "want an integer, got 2.5") {
		t.Errorf("fraction: %v", err)
	}
	if err := ApplyParam(&c, "seed", 1e30); err == nil {
		t.Error("huge seed accepted")
	}
	if err := ApplyParam(&c, "policy", 1); err == nil || !strings.Contains(err.Error(), `unknown sweep parameter "policy"`) {
		t.Errorf("unknown: %v", err)
	}
	if err := ApplyParam(&c, "load", 0.25); err != nil || c.Workload.Load != 0.25 {
		t.Errorf("load: %v %v", err, c.Workload.Load)
	}
	if err := ApplyParam(&c, "cards_per_tray", 7); err != nil || c.CardsPerTray != 7 {
		t.Errorf("ApplyParam validates: %v", err)
	}
}

// parseNoValidate decodes src over Defaults() without validating it.
func parseNoValidate(src string) (*Config, error) {
	c := Defaults()
	p := &scenarioParser{file: "x.yaml", lines: map[string]int{}}
	if _, err := p.decode([]byte(src), &c); err != nil {
		return nil, err
	}
	return &c, nil
}

func TestScenarioExamples(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "scenarios", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	archs := map[string]bool{}
	for _, f := range files {
		sc, err := LoadScenario(f)
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		archs[sc.Config.Architecture+"/"+sc.Config.Network] = true
		switch filepath.Base(f) {
		case "traditional.yaml":
			if want := filepath.Join("testdata", "traces", "small.csv"); sc.Config.Workload.Trace != want {
				t.Errorf("trace %q, want %q", sc.Config.Workload.Trace, want)
			}
			reqs, err := ReadTrace(sc.Config.Workload.Trace)
			if err != nil || len(reqs) != 50 {
				t.Errorf("trace: %d requests, %v", len(reqs), err)
			}
		case "sweep.yaml":
			if n := len(sc.Sweep.Points()); n != 36 {
				t.Errorf("sweep.yaml: %d points", n)
			}
		}
	}
	if len(files) < 5 || !archs["traditional/monet"] || !archs["rack/monet"] || !archs["pod/monet"] || !archs["pod/fat-tree"] {
		t.Errorf("examples %v cover %v", files, archs)
	}
}
