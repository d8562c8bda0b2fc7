package rfdriver

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"testing"
	"time"

	"rackpool/examples"
	"rackpool/internal/clock"
	"rackpool/internal/fabric"
	"rackpool/internal/fabric/fabrictest"
	"rackpool/internal/fabric/fmserver"
	"rackpool/internal/inventory"
	"rackpool/internal/topology"
)

// scaledClock reads the wall clock and sleeps 1/div of what it is asked:
// modelled reconfiguration times pass div times faster but still in
// order, so a check that compares two Results' Took (fabrictest's
// ReleaseStalls: a forced release is no faster than a cooperative one)
// sees the difference. clock.Instant cannot show it: Took is measured.
type scaledClock struct{ div time.Duration }

func (c scaledClock) Now() time.Time        { return time.Now() }
func (c scaledClock) Sleep(d time.Duration) { time.Sleep(d / c.div) }

// fabricClock is the emulated fabric's clock in these tests: instant,
// but for CXL fabrics, whose release timeout (5 s in the example) the
// suite compares with a cooperative release, ten times faster than
// modelled.
func fabricClock(f *inventory.Fabric) clock.Clock {
	if f.Kind == inventory.CXLMemory {
		return scaledClock{div: 10}
	}
	return clock.Instant{}
}

// manager is an fmserver in front of one fabric, served over httptest.
type manager struct {
	srv *fmserver.Server
	url string
}

// fastRetry rewrites the Retry-After of 503 answers to 0: fmserver says 1
// second, which the driver honours and which would make a chaos run of
// thousands of requests last many minutes. The driver's own backoff then
// paces the retries (TestRetryAfterHonoured checks the honouring).
func fastRetry(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(retryAfterZero{w}, r)
	})
}

type retryAfterZero struct{ http.ResponseWriter }

func (w retryAfterZero) WriteHeader(code int) {
	if code == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "0")
	}
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController hijack the connection (fmserver's
// lost answers).
func (w retryAfterZero) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func startManager(t testing.TB, top *topology.Topology, fabricID string, chaos int64) *manager {
	t.Helper()
	srv, err := fmserver.New(fmserver.Options{
		Topology: top, Fabric: fabricID, Clock: fabricClock(top.Fabric(fabricID)),
		User: "rackpool", Password: "test-password", Chaos: chaos,
	})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(fastRetry(srv.Handler()))
	t.Cleanup(hs.Close)
	return &manager{srv: srv, url: hs.URL}
}

// newDriver is a driver of m with operation timeout timeout. Its request
// timeout (10 s) is one an answered exchange never reaches on a loaded
// machine: a refusal whose answer came late would otherwise be sent again
// (an armed attach-fails spent twice) and a change whose answer came late
// read back. The manager closes the connection of an answer it loses, so
// no test waits for this timeout.
func newDriver(t testing.TB, top *topology.Topology, fabricID string, m *manager, timeout time.Duration) *Driver {
	t.Helper()
	d, err := New(context.Background(), Options{
		Topology: top, Fabric: fabricID, URL: m.url, User: "rackpool", Password: "test-password",
		Timeout: timeout, RequestTimeout: 10 * time.Second, Logger: testLogger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close(context.Background()) })
	return d
}

func exampleTopologies(t *testing.T) []*topology.Topology {
	t.Helper()
	var out []*topology.Topology
	for _, ex := range []struct {
		name string
		data []byte
	}{{"rack", examples.Rack}, {"cxl-rack", examples.CXLRack}} {
		top, err := topology.Parse(ex.name+".yaml", ex.data)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, top)
	}
	return out
}

// conformanceFabrics are the fabrics the suite runs on: every fabric of
// the default rack, and the CXL fabric of the CXL rack.
func conformanceFabrics(t *testing.T) []struct {
	top *topology.Topology
	f   *inventory.Fabric
} {
	tops := exampleTopologies(t)
	var out []struct {
		top *topology.Topology
		f   *inventory.Fabric
	}
	for _, f := range tops[0].Fabrics {
		out = append(out, struct {
			top *topology.Topology
			f   *inventory.Fabric
		}{tops[0], f})
	}
	for _, f := range tops[1].Fabrics {
		if f.Kind == inventory.CXLMemory {
			out = append(out, struct {
				top *topology.Topology
				f   *inventory.Fabric
			}{tops[1], f})
		}
	}
	return out
}

// TestConformance runs fabrictest against the driver operating fmserver,
// for every fabric kind.
func TestConformance(t *testing.T) {
	for _, x := range conformanceFabrics(t) {
		t.Run(string(x.f.Kind)+"/"+x.f.ID, func(t *testing.T) {
			fabrictest.Run(t, x.top, x.f.ID, func(t *testing.T) fabric.Driver {
				return newDriver(t, x.top, x.f.ID, startManager(t, x.top, x.f.ID, 0), 30*time.Second)
			})
		})
	}
}

// chaosSeedBase is the first chaos seed; each driver the suite asks for
// gets a manager seeded with the next. RFDRIVER_CHAOS_SEED overrides it
// (seeds 0, 100 and 200 were run). Chaos loses only the answers of changes
// that were made: a refused attach whose answer is lost is
// indistinguishable from a lost request, so the driver (rightly) sends it
// again, which would spend a second count of an armed attach-fails
// (TestLostRefusalSpendsInjectedFault, with a forced lose-response).
const chaosSeedBase int64 = 1

// TestConformanceChaos runs the same suite with the manager in chaos
// mode: 503 bursts, lost answers and restarts at random (seeded).
func TestConformanceChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos conformance is long")
	}
	for _, x := range conformanceFabrics(t) {
		t.Run(string(x.f.Kind)+"/"+x.f.ID, func(t *testing.T) {
			seed := chaosSeedBase
			if s, err := strconv.ParseInt(os.Getenv("RFDRIVER_CHAOS_SEED"), 10, 64); err == nil {
				seed = s
			}
			fabrictest.Run(t, x.top, x.f.ID, func(t *testing.T) fabric.Driver {
				seed++
				return newDriver(t, x.top, x.f.ID, startManager(t, x.top, x.f.ID, seed), 30*time.Second)
			})
		})
	}
}

// testLogger discards, unless RFDRIVER_DEBUG is set.
func testLogger() *slog.Logger {
	if os.Getenv("RFDRIVER_DEBUG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}
