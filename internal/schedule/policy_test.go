package schedule

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"rackpool/internal/topology"
)

// hostsOnly returns a topology of n hosts with the given cores (cycled)
// and 64 GiB each, no fabrics: traditional servers.
func hostsOnly(t testing.TB, n int, cores ...int) *topology.Topology {
	t.Helper()
	var b strings.Builder
	b.WriteString("name: servers\nracks:\n  - id: r1\n    hosts:\n")
	for i := range n {
		fmt.Fprintf(&b, "      - {id: h%d, cores: %d, memory: 64GiB}\n", i, cores[i%len(cores)])
	}
	top, err := topology.Parse("servers.yaml", []byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	return top
}

// reference picks a host the slow, obvious way: every host in index
// order, the policy's rule over those with enough free cores and memory.
func reference(p Policy, st *State, last int, sh Share) int {
	n := len(st.top.Hosts)
	fits := func(i int) bool {
		f := st.FreeShare(st.top.Hosts[i])
		return st.used[st.top.Hosts[i].Block.Index] == 0 && f.Cores >= sh.Cores && f.MemoryGiB >= sh.MemoryGiB
	}
	switch p {
	case FirstFit, Locality:
		for i := range n {
			if fits(i) {
				return i
			}
		}
	case NextFit:
		for k := range n {
			if i := (last + k) % n; fits(i) {
				return i
			}
		}
	case BestFit, WorstFit:
		best := -1
		for i := range n {
			if !fits(i) {
				continue
			}
			c, bc := st.freeCores[i], int32(0)
			if best >= 0 {
				bc = st.freeCores[best]
			}
			if best < 0 || (p == BestFit && c < bc) || (p == WorstFit && c > bc) {
				best = i
			}
		}
		return best
	}
	return -1
}

// TestPoliciesMatchReference places and releases random shares on hosts of
// mixed sizes (some above 63 cores, which share one bit of the index) and
// checks every choice against the reference.
func TestPoliciesMatchReference(t *testing.T) {
	for _, p := range Policies {
		t.Run(string(p), func(t *testing.T) {
			top := hostsOnly(t, 37, 4, 8, 16, 64, 96, 2)
			s, st := New(top), NewState(top)
			s.Policy = p
			rng := rand.New(rand.NewPCG(1, uint64(len(p))))
			var live []*Plan
			for step := range 3000 {
				if len(live) > 0 && rng.IntN(3) == 0 {
					k := rng.IntN(len(live))
					st.Uncommit(live[k])
					live = append(live[:k], live[k+1:]...)
					continue
				}
				sh := Share{Cores: 1 + rng.IntN(12), MemoryGiB: rng.IntN(24)}
				want := reference(p, st, st.lastHost, sh)
				plan, err := s.Schedule(st, Request{Share: sh})
				if want < 0 {
					var u *Unsatisfiable
					if !errors.As(err, &u) {
						t.Fatalf("step %d: %+v: got %v, %v; want unsatisfiable", step, sh, plan, err)
					}
					for _, r := range u.Rejections {
						if r.Reason != HostFull && r.Reason != HostCores && r.Reason != HostMemory {
							t.Fatalf("step %d: rejection %+v", step, r)
						}
					}
					continue
				}
				if err != nil {
					t.Fatalf("step %d: %+v: %v; want host h%d", step, sh, err, want)
				}
				if plan.Host.Index != want {
					t.Fatalf("step %d: %+v: placed on %s, want h%d", step, sh, plan.Host.ID, want)
				}
				if len(plan.Assignments) != 0 || plan.Share != sh {
					t.Fatalf("step %d: plan %+v holds the compute block or the wrong share", step, plan)
				}
				st.Commit(plan)
				live = append(live, plan)
			}
			for _, pl := range live {
				st.Uncommit(pl)
			}
			for _, h := range top.Hosts {
				if f := st.FreeShare(h); f.Cores != h.Cores || f.MemoryGiB != h.MemoryGiB || st.Shares(h) != 0 {
					t.Fatalf("%s after releasing everything: %+v free, %d shares", h.ID, f, st.Shares(h))
				}
			}
		})
	}
}

// TestSharesAndWholeHosts checks that a host held whole takes no shares
// and a host carrying shares cannot be taken whole, with transient
// reasons that clear when the holder leaves.
func TestSharesAndWholeHosts(t *testing.T) {
	top := hostsOnly(t, 1, 8)
	s, st := New(top), NewState(top)
	whole, err := s.Schedule(st, Request{})
	if err != nil {
		t.Fatal(err)
	}
	st.Commit(whole)
	_, err = s.Schedule(st, Request{Share: Share{Cores: 1}})
	var u *Unsatisfiable
	if !errors.As(err, &u) || u.Never || u.Rejections[0].Reason != HostInUse {
		t.Fatalf("share on a whole host: %v", err)
	}
	st.Uncommit(whole)
	sh, err := s.Schedule(st, Request{Share: Share{Cores: 6, MemoryGiB: 10}})
	if err != nil {
		t.Fatal(err)
	}
	st.Commit(sh)
	if _, err := s.Schedule(st, Request{}); !errors.As(err, &u) || u.Never || u.Rejections[0].Reason != HostInUse {
		t.Fatalf("whole host carrying a share: %v", err)
	}
	if _, err := s.Schedule(st, Request{Share: Share{Cores: 3}}); !errors.As(err, &u) || u.Never || u.Rejections[0].Reason != HostFull {
		t.Fatalf("share beyond the free cores: %v", err)
	}
	if _, err := s.Schedule(st, Request{Share: Share{Cores: 9}}); !errors.As(err, &u) || !u.Never || u.Rejections[0].Reason != HostCores {
		t.Fatalf("share beyond the host: %v", err)
	}
	if _, err := s.Schedule(st, Request{Share: Share{MemoryGiB: 4}}); !errors.Is(err, ErrBadRequest) {
		t.Fatalf("share without cores: %v", err)
	}
	st.Uncommit(sh)
	if _, err := s.Schedule(st, Request{}); err != nil {
		t.Fatalf("whole host after the share left: %v", err)
	}
}

func TestParsePolicy(t *testing.T) {
	for _, p := range Policies {
		if got, err := ParsePolicy(string(p)); err != nil || got != p {
			t.Errorf("ParsePolicy(%q) = %q, %v", p, got, err)
		}
	}
	if _, err := ParsePolicy("firstfit"); err == nil || !strings.Contains(err.Error(), "first-fit") {
		t.Errorf("unknown policy: %v", err)
	}
}

// BenchmarkFirstFitShares measures share placement on 25,000 hosts of 4
// cores held about 80% full: the simulator's trace-replay hot path.
func BenchmarkFirstFitShares(b *testing.B) {
	for _, p := range Policies {
		b.Run(string(p), func(b *testing.B) {
			top := hostsOnly(b, 25000, 4)
			s, st := New(top), NewState(top)
			s.Policy = p
			rng := rand.New(rand.NewPCG(7, 7))
			var live []*Plan
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				plan, err := s.Place(st, Request{Share: Share{Cores: 1 + rng.IntN(4), MemoryGiB: 1 + rng.IntN(32)}})
				if err != nil {
					b.Fatal(err)
				}
				if plan != nil {
					st.Commit(plan)
					live = append(live, plan)
				}
				if len(live) > 32000 {
					k := rng.IntN(len(live))
					st.Uncommit(live[k])
					live[k] = live[len(live)-1]
					live = live[:len(live)-1]
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
		})
	}
}
