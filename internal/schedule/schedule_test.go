package schedule

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"rackpool/internal/inventory"
	"rackpool/internal/topology"
	"rackpool/internal/units"
)

var update = flag.Bool("update", false, "rewrite golden files")

// goldenCase is one testdata/*.json file: requests composed first (setup),
// then the request under test; the plan or the rejections are compared with
// the .golden file beside it.
type goldenCase struct {
	Setup   []jsonRequest `json:"setup"`
	Request jsonRequest   `json:"request"`
}

type jsonRequest struct {
	Host     string     `json:"host"`
	Blocks   []string   `json:"blocks"`
	Needs    []jsonNeed `json:"needs"`
	Affinity string     `json:"affinity"`
	Zone     string     `json:"zone"`
	MinCores int        `json:"min_cores"`
	Expand   bool       `json:"expand"`
	Held     []string   `json:"held"`
}

type jsonNeed struct {
	Kind         string            `json:"kind"`
	Count        int               `json:"count"`
	Capacity     string            `json:"capacity"`
	Model        string            `json:"model"`
	Attrs        map[string]string `json:"attrs"`
	MaxLatencyNS float64           `json:"max_latency_ns"`
}

func (r jsonRequest) request(t *testing.T) Request {
	req := Request{Host: r.Host, Blocks: r.Blocks, Affinity: Affinity(r.Affinity), Zone: r.Zone, MinCores: r.MinCores, Expand: r.Expand, Held: r.Held}
	for _, n := range r.Needs {
		need := Need{Kind: inventory.Kind(n.Kind), Count: n.Count, Model: n.Model, Attrs: n.Attrs, MaxLatencyNS: n.MaxLatencyNS}
		if n.Capacity != "" {
			c, err := units.ParseBytes(n.Capacity)
			if err != nil {
				t.Fatal(err)
			}
			need.CapacityBytes = c
		}
		req.Needs = append(req.Needs, need)
	}
	return req
}

func render(p *Plan, err error) string {
	var b strings.Builder
	if err != nil {
		var u *Unsatisfiable
		if !errors.As(err, &u) {
			return "error: " + err.Error() + "\n"
		}
		fmt.Fprintf(&b, "unsatisfiable never=%v\n", u.Never)
		for _, r := range u.Rejections {
			fmt.Fprintf(&b, "  %s need=%d block=%q %s: %s\n", r.Host, r.Need, r.Block, r.Reason, r.Detail)
		}
		return b.String()
	}
	fmt.Fprintf(&b, "host %s rtt=%.1fns hops=%d groups=%d\n", p.Host.ID, p.TotalRTTNS, p.TotalHops, p.Groups)
	for _, a := range p.Assignments {
		port := "-"
		if a.Port != nil {
			port = a.Port.ID
		}
		fmt.Fprintf(&b, "  %-14s %-8s via %-6s rtt=%.1fns hops=%d\n", a.Block.ID, a.Block.Kind, port, a.RTTNS, a.Hops)
	}
	return b.String()
}

func TestGolden(t *testing.T) {
	top := topology.LoadDefault()
	files, _ := filepath.Glob("testdata/*.json")
	if len(files) == 0 {
		t.Fatal("no golden cases")
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var gc goldenCase
			if err := json.Unmarshal(data, &gc); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			s := New(top)
			st := NewState(top)
			for i, r := range gc.Setup {
				p, err := s.Schedule(st, r.request(t))
				if err != nil {
					t.Fatalf("setup %d: %v", i, err)
				}
				st.Acquire(p.Host, p.Assignments)
			}
			got := render(s.Schedule(st, gc.Request.request(t)))
			golden := strings.TrimSuffix(f, ".json") + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update)", err)
			}
			if got != string(want) {
				t.Errorf("%s changed:\n--- want\n%s--- got\n%s", name, want, got)
			}
		})
	}
}

func TestRequestErrors(t *testing.T) {
	top := topology.LoadDefault()
	s, st := New(top), NewState(top)
	cases := []struct {
		name string
		req  Request
		want error
	}{
		{"unknown host", Request{Host: "host9"}, ErrUnknownHost},
		{"unknown block", Request{Blocks: []string{"gpu99"}}, ErrUnknownBlock},
		{"unknown zone", Request{Zone: "nowhere"}, ErrUnknownZone},
		{"bad kind", Request{Needs: []Need{{Kind: "tpu", Count: 1}}}, ErrBadRequest},
		{"zero count", Request{Needs: []Need{{Kind: inventory.GPU}}}, ErrBadRequest},
		{"negative", Request{Needs: []Need{{Kind: inventory.GPU, Count: -1}}}, ErrBadRequest},
		{"bad affinity", Request{Affinity: "same-planet"}, ErrBadRequest},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := s.Schedule(st, tc.req); !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
}

// TestStateAcquireRelease checks that releasing what was acquired restores
// the state, optical circuits included.
func TestStateAcquireRelease(t *testing.T) {
	top := topology.LoadDefault()
	s, st := New(top), NewState(top)
	p, err := s.Schedule(st, Request{Host: "host1", Needs: []Need{{Kind: inventory.Memory, CapacityBytes: 64 * units.GiB}, {Kind: inventory.GPU, Count: 2}}})
	if err != nil {
		t.Fatal(err)
	}
	st.Acquire(p.Host, p.Assignments)
	if st.Free(top.Block("host1")) {
		t.Fatal("host1 still free after acquire")
	}
	port := top.Host("host1").Ports[2]
	if st.Circuit(port) == nil {
		t.Fatal("no optical circuit recorded for host1")
	}
	st.Release(p.Host, p.Assignments)
	if !st.Free(top.Block("host1")) || st.Circuit(port) != nil || slices.ContainsFunc(st.circuits, func(n int32) bool { return n != 0 }) {
		t.Fatal("release did not restore the state")
	}
	for _, b := range top.Blocks {
		if st.Used(b) != 0 {
			t.Fatalf("%s still used", b.ID)
		}
	}
	fresh := NewState(top)
	if !slices.Equal(st.freeMask, fresh.freeMask) || !slices.Equal(st.devFree, fresh.devFree) || !slices.Equal(st.memFree.mask, fresh.memFree.mask) {
		t.Fatal("release did not restore the free-block indexes")
	}
}

// TestExact: without overprovisioning, memory must add up to exactly the
// request and other blocks must have exactly the asked capacity.
func TestExact(t *testing.T) {
	top := topology.LoadDefault()
	s, st := New(top), NewState(top)
	gib := int64(units.GiB)
	for _, tc := range []struct {
		need Need
		fits bool
	}{
		{Need{Kind: inventory.Memory, CapacityBytes: 64 * gib, Exact: true}, true},
		{Need{Kind: inventory.Memory, CapacityBytes: 12 * gib}, true},
		{Need{Kind: inventory.Memory, CapacityBytes: 12 * gib, Exact: true}, false},
		{Need{Kind: inventory.HDD, Count: 1, CapacityBytes: 1}, true},
		{Need{Kind: inventory.HDD, Count: 1, CapacityBytes: 1, Exact: true}, false},
	} {
		p, err := s.Schedule(st, Request{Host: "host1", Needs: []Need{tc.need}})
		if (err == nil) != tc.fits {
			t.Errorf("%+v: fits=%v, err=%v", tc.need, err == nil, err)
			continue
		}
		if err == nil && tc.need.Kind == inventory.Memory {
			var total int64
			for _, a := range p.Assignments {
				if a.Block.Kind == inventory.Memory {
					total += a.Block.CapacityBytes
				}
			}
			if tc.need.Exact && total != tc.need.CapacityBytes {
				t.Errorf("%+v: got %d bytes", tc.need, total)
			}
		}
	}
}
