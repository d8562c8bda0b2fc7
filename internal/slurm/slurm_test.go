package slurm

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"rackpool/internal/topology"
)

func TestExpandHostlist(t *testing.T) {
	for in, want := range map[string]string{
		"n1":                    "n1",
		"n[1-3,5]":              "n1 n2 n3 n5",
		"n[1-2],gpu01,m[08-10]": "n1 n2 gpu01 m08 m09 m10",
		"rack[1-2]-a":           "rack1-a rack2-a",
		"":                      "",
	} {
		got, err := ExpandHostlist(in)
		if err != nil || strings.Join(got, " ") != want {
			t.Errorf("ExpandHostlist(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"n[1-", "n[3-1]", "n[a-b]", "n[1-2][3]", "n[0-99999999]"} {
		if got, err := ExpandHostlist(bad); err == nil {
			t.Errorf("ExpandHostlist(%q) = %v, want an error", bad, got)
		}
	}
}

func TestConstraintFeatures(t *testing.T) {
	for in, want := range map[string]string{
		"gpu2&nvme": "gpu2 nvme", "gpu2,nvme": "gpu2 nvme", "[gpu2|nvme]": "gpu2", "gpu2*2&nvme": "gpu2 nvme",
		"(null)": "", "": "", "gpu1&gpu1": "gpu1",
	} {
		if got := strings.Join(ConstraintFeatures(in), " "); got != want {
			t.Errorf("ConstraintFeatures(%q) = %q, want %q", in, got, want)
		}
	}
}

const exampleConfig = `
nodes:
  n1: {host: host1, addr: 127.0.0.1, port: 17001}
  n4: {host: host4}
templates:
  gpu1: {needs: ["1 gpu"]}
  gpu2: {needs: ["2 gpu"], affinity: same-drawer}
  nvme: {needs: ["1 nvme"]}
  mem64: {needs: ["64GiB memory"]}
  gpu99: {needs: ["99 gpu"]}
`

func TestParseConfig(t *testing.T) {
	c, err := ParseConfig("slurm.yaml", []byte(exampleConfig))
	if err != nil {
		t.Fatal(err)
	}
	req, err := c.Request("n1", []string{"gpu2", "nvme", "intel"})
	if err != nil || req.Host != "host1" || req.Affinity != "same-drawer" || len(req.Needs) != 2 || req.Needs[0].Count != 2 ||
		req.Name != "slurm n1 [gpu2 nvme intel]" {
		t.Errorf("Request = %+v, %v", req, err)
	}
	if nodeOf(req.Name) != "n1" || nodeOf("slurm n1") != "n1" || nodeOf("k8s host1") != "" {
		t.Error("nodeOf")
	}
	if _, err := c.Request("n9", nil); err == nil {
		t.Error("Request for a node not in the config")
	}
	for bad, want := range map[string]string{
		"nodes: {n1: {host: host1}}\ntemplates: {g: {needs: [\"x gpu\"]}}":                 "not a count",
		"nodes: {n1: {host: host1}}\ntemplates: {g: {needs: [\"1 gpu\"], affinity: near}}": "affinity",
		"nodes: {n1: {}}":                                "no rackpool host",
		"nodes: {\"n 1\": {host: h}}":                    "not a Slurm node name",
		"nodes: {n1: {host: host1, color: red}}":         "color",
		"templates: {g: {needs: [\"1 gpu\"]}}":           "nodes: none",
		"nodes: {n1: {host: host1}}\ntemplates: {g: {}}": "no needs",
	} {
		if _, err := ParseConfig("bad.yaml", []byte(bad)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseConfig(%q) = %v, want an error with %q", bad, err, want)
		}
	}
}

// TestGenerate: on the example rack, each node is offered the templates
// the placement engine can compose onto its host (host4 reaches no GPU),
// and a template no host can take is noted, not offered.
func TestGenerate(t *testing.T) {
	c, err := ParseConfig("slurm.yaml", []byte(exampleConfig))
	if err != nil {
		t.Fatal(err)
	}
	top := topology.LoadDefault()
	f1, err := c.Feasible(top, "n1")
	if err != nil || !slices.Equal(f1, []string{"gpu1", "gpu2", "mem64", "nvme"}) {
		t.Errorf("n1 (host1) can be %v, %v", f1, err)
	}
	f4, _ := c.Feasible(top, "n4")
	if slices.Contains(f4, "gpu1") || slices.Contains(f4, "gpu2") {
		t.Errorf("n4 (host4, which reaches no GPU) offered %v", f4)
	}
	g, err := Generate(c, top, ConfOptions{Programs: "/usr/local/sbin", SuspendTime: 30e9})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ResumeProgram=/usr/local/sbin/rackpool-slurm-resume", "SuspendTime=30",
		"NodeName=n1 NodeAddr=127.0.0.1 Port=17001 CPUs=", "State=CLOUD Feature=gpu1,gpu2,mem64,nvme\n",
		"PartitionName=rackpool Nodes=n1,n4 State=UP", "NodeFeaturesPlugins=node_features/helpers"} {
		if !strings.Contains(g.SlurmConf, want) {
			t.Errorf("slurm.conf lacks %q:\n%s", want, g.SlurmConf)
		}
	}
	if !strings.Contains(g.HelpersConf, "Feature=gpu2 Helper=/usr/local/sbin/rackpool-slurm-features\n") || strings.Contains(g.HelpersConf, "gpu99") {
		t.Errorf("helpers.conf:\n%s", g.HelpersConf)
	}
	if len(g.Notes) != 1 || !strings.Contains(g.Notes[0], "gpu99") {
		t.Errorf("notes %v", g.Notes)
	}
}

type fakeSlurm struct{ features map[int64][]string }

func (f fakeSlurm) JobFeatures(_ context.Context, job int64) ([]string, error) {
	return f.features[job], nil
}
func (fakeSlurm) Fail(context.Context, string, string) error { return nil }

// TestNodeFeatures: the resume file gives each node its jobs' features
// (from the file when Slurm writes them, else from the job), nodes of the
// hostlist without a job get none, and a file that is not Slurm's JSON is
// an error naming it.
func TestNodeFeatures(t *testing.T) {
	dir := t.TempDir()
	p := &Power{Slurm: fakeSlurm{features: map[int64][]string{7: {"gpu2"}}}}
	file := filepath.Join(dir, "resume.json")
	if err := os.WriteFile(file, []byte(`{"all_nodes":"n[1-3]","jobs":[{"job_id":7,"nodes":"n[1-2]"},{"job_id":8,"nodes":"n2","features":"nvme"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := p.NodeFeatures(context.Background(), "n[1-3]", file)
	if err != nil || strings.Join(got["n1"], " ") != "gpu2" || strings.Join(got["n2"], " ") != "gpu2 nvme" || len(got["n3"]) != 0 || len(got) != 3 {
		t.Errorf("NodeFeatures = %v, %v", got, err)
	}
	for name, content := range map[string]string{"truncated.json": `{"jobs":[{"job_id":7,`, "wrong.json": `{"jobs":"n1"}`} {
		f := filepath.Join(dir, name)
		if err := os.WriteFile(f, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := p.NodeFeatures(context.Background(), "n1", f); err == nil || !strings.Contains(err.Error(), "SLURM_RESUME_FILE") {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := p.NodeFeatures(context.Background(), "n[1-", ""); err == nil {
		t.Error("a bad hostlist")
	}
}
