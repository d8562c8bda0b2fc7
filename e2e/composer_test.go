package e2e

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"rackpool/api"
	"rackpool/internal/childproc"
)

// TestComposeThroughComposer drives a vendor composer as DMTF's
// composability model has one (resource blocks composed into
// ComputerSystems, no fabric): another rackpool serving the example rack,
// whose composition the DMTF interop validator checks. `discover
// --composition` reads it into a topology; serve on that topology then
// composes, shrinks and decomposes through it, and the composer's own
// composed systems say so after each step. A block the composer has given
// to a system of its own is refused and changes nothing on either side.
func TestComposeThroughComposer(t *testing.T) {
	skipShort(t)
	ctx := context.Background()
	vendor := startDefault(t, "--fabric-time", "instant")
	topo := discoverComposer(t, vendor)
	s := start(t, t.TempDir(), []string{"RACKPOOL_ADMIN_PASSWORD=" + password, "RACKPOOL_COMPOSER_PASSWORD=" + password},
		"--topology", topo, "--fabric-time", "instant")
	c, vc := s.client(), vendor.client()
	expect := composedOn(t, vc)

	sys, err := c.Compose(ctx, api.ComposeRequest{Name: "through", Blocks: []string{"host1", "gpu1", "nvme1", "memnode1-b01-b01"}})
	if err != nil {
		t.Fatal(err)
	}
	expect("the compose", map[string][]string{"host1": {"host1", "gpu1", "nvme1", "memnode1-b01"}})
	if _, err := c.Expand(ctx, sys.ID, nil, nil, []string{"nvme1"}); err != nil {
		t.Fatal(err)
	}
	expect("the shrink", map[string][]string{"host1": {"host1", "gpu1", "memnode1-b01"}})

	// The composer gives gpu2 to a system of its own: composing it here is
	// refused, and neither side changes.
	if _, err := vc.Compose(ctx, api.ComposeRequest{Name: "vendor's", Blocks: []string{"host2", "gpu2"}}); err != nil {
		t.Fatal(err)
	}
	before, err := c.Systems(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Compose(ctx, api.ComposeRequest{Name: "refused", Blocks: []string{"host3", "gpu2"}}); err == nil ||
		!strings.Contains(err.Error(), "409 Base.1.22.ResourceInUse") {
		t.Fatalf("composing a block the composer gave away: %v, want 409 ResourceInUse", err)
	}
	after, err := c.Systems(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if countComposed(after) != countComposed(before) {
		t.Errorf("the refused compose left %d composed systems, %d before", countComposed(after), countComposed(before))
	}
	expect("the refused compose", map[string][]string{"host1": {"host1", "gpu1", "memnode1-b01"}, "host2": {"host2", "gpu2"}})

	// Decomposing here decomposes there, leaving the composer's own.
	if err := c.Decompose(ctx, sys.ID); err != nil {
		t.Fatal(err)
	}
	expect("the decompose", map[string][]string{"host2": {"host2", "gpu2"}})
	if strings.Contains(s.stderr.String(), password) {
		t.Error("serve logged the composer's password")
	}
}

// discoverComposer runs discover --composition against vendor and returns
// the topology file it wrote.
func discoverComposer(t *testing.T, vendor *server) string {
	t.Helper()
	topo := filepath.Join(t.TempDir(), "composer.yaml")
	cmd := childproc.Command(binary, "discover", "--redfish", vendor.url, "--user", "Administrator", "--ca-file", vendor.ca,
		"--composition", "--out", topo)
	cmd.Env = append(os.Environ(), "RACKPOOL_DISCOVER_PASSWORD="+password)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("discover --composition: %v\n%s", err, out)
	}
	y, err := os.ReadFile(topo)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"api: composition", "- id: host1", "{id: gpu1, kind: gpu, model: V100", "password_env: RACKPOOL_COMPOSER_PASSWORD"} {
		if !strings.Contains(string(y), want) {
			t.Fatalf("the discovered topology lacks %q:\n%s", want, y)
		}
	}
	return topo
}

// composedOn returns a check of what vc's service has composed: each
// composed system's blocks, by the system's Compute block.
func composedOn(t *testing.T, vc *api.Client) func(step string, want map[string][]string) {
	return func(step string, want map[string][]string) {
		t.Helper()
		systems, err := vc.Systems(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		got := map[string][]string{}
		for _, sys := range systems {
			if sys.SystemType != "Composed" {
				continue
			}
			var blocks []string
			for _, l := range sys.Links.ResourceBlocks {
				blocks = append(blocks, l.ID[strings.LastIndexByte(l.ID, '/')+1:])
			}
			if _, dup := got[blocks[0]]; dup {
				t.Fatalf("after %s the composer has two systems of %s", step, blocks[0])
			}
			got[blocks[0]] = blocks
		}
		if len(got) != len(want) {
			t.Fatalf("after %s the composer has %v, want %v", step, got, want)
		}
		for host, blocks := range want {
			if !slices.Equal(got[host], blocks) {
				t.Fatalf("after %s the composer has %v, want %v", step, got, want)
			}
		}
	}
}

// TestComposerLostAnswers puts a proxy between serve and the composer that
// carries out the first POST, PATCH and DELETE of a composed system and
// drops the answer, as a network that fails after the request arrived:
// the driver must read the composer's state back, find the change made,
// and never compose twice.
func TestComposerLostAnswers(t *testing.T) {
	skipShort(t)
	ctx := context.Background()
	vendor := startDefault(t, "--fabric-time", "instant")
	var mu sync.Mutex
	dropped := map[string]bool{} // method → an answer of it was dropped
	s := throughProxy(t, vendor, func(w http.ResponseWriter, r *http.Request, rp http.Handler) bool {
		if r.Method == http.MethodGet || !strings.HasPrefix(r.URL.Path, "/redfish/v1/Systems") {
			return false
		}
		mu.Lock()
		drop := !dropped[r.Method]
		dropped[r.Method] = true
		mu.Unlock()
		if !drop {
			return false
		}
		rec := httptest.NewRecorder()
		rp.ServeHTTP(rec, r) // carried out...
		t.Logf("proxy: %s %s answered %d; the answer is dropped", r.Method, r.URL.Path, rec.Code)
		panic(http.ErrAbortHandler) // ...and its answer lost
	})
	c := s.client()
	expect := composedOn(t, vendor.client())

	sys, err := c.Compose(ctx, api.ComposeRequest{Name: "lossy", Blocks: []string{"host1", "gpu1", "nvme1"}})
	if err != nil {
		t.Fatal(err)
	}
	expect("a compose whose POST's answer was lost", map[string][]string{"host1": {"host1", "gpu1", "nvme1"}})
	if _, err := c.Expand(ctx, sys.ID, nil, nil, []string{"gpu1"}); err != nil {
		t.Fatal(err)
	}
	expect("a shrink whose PATCH's answer was lost", map[string][]string{"host1": {"host1", "nvme1"}})
	if err := c.Decompose(ctx, sys.ID); err != nil {
		t.Fatal(err)
	}
	expect("a decompose whose DELETE's answer was lost", map[string][]string{})
	mu.Lock()
	defer mu.Unlock()
	for _, m := range []string{http.MethodPost, http.MethodPatch, http.MethodDelete} {
		if !dropped[m] {
			t.Errorf("no %s went through the proxy", m)
		}
	}
}

// throughProxy serves the topology discover makes of vendor with the
// composer reached through a proxy on loopback (plain HTTP), whose hook
// answers a request itself (true) or lets it through to vendor (false).
func throughProxy(t *testing.T, vendor *server, hook func(w http.ResponseWriter, r *http.Request, rp http.Handler) bool) *server {
	t.Helper()
	topo := discoverComposer(t, vendor)
	target, err := url.Parse(vendor.url)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = vendor.http.Transport
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !hook(w, r, rp) {
			rp.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(proxy.Close)
	y, err := os.ReadFile(topo)
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`url: '[^']*', ca_file: [^,]*,`)
	if !re.Match(y) {
		t.Fatalf("no manager url and ca_file in the topology:\n%s", y)
	}
	y = re.ReplaceAll(y, []byte("url: '"+proxy.URL+"',"))
	if err := os.WriteFile(topo, y, 0o600); err != nil {
		t.Fatal(err)
	}
	return start(t, t.TempDir(), []string{"RACKPOOL_ADMIN_PASSWORD=" + password, "RACKPOOL_COMPOSER_PASSWORD=" + password},
		"--topology", topo, "--fabric-time", "instant")
}

// TestComposerBadAnswers: a composer whose answers are malformed (a
// property of the wrong type, a body past the driver's 4 MiB cap) fails
// the compose within the driver's deadline, with the URL and what was
// wrong in serve's log and nothing internal in the client's answer; the
// composer is left with nothing composed, and once it answers well again
// the same compose succeeds.
func TestComposerBadAnswers(t *testing.T) {
	skipShort(t)
	ctx := context.Background()
	vendor := startDefault(t, "--fabric-time", "instant")
	var mode atomic.Value
	mode.Store("")
	s := throughProxy(t, vendor, func(w http.ResponseWriter, r *http.Request, _ http.Handler) bool {
		if r.Method != http.MethodGet || r.URL.Path != "/redfish/v1/Systems" {
			return false
		}
		switch mode.Load().(string) {
		case "wrong type":
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"Members": {"@odata.id": "/redfish/v1/Systems/host1"}}`))
			return true
		case "too large":
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"Members": [], "Pad": "`))
			_, _ = w.Write([]byte(strings.Repeat("x", 5<<20)))
			_, _ = w.Write([]byte(`"}`))
			return true
		}
		return false
	})
	c := s.client()
	expect := composedOn(t, vendor.client())
	for _, tc := range []struct{ mode, logged string }{
		{"wrong type", "property Members is a JSON object, want an array"},
		{"too large", "answer larger than 4 MiB"},
	} {
		mode.Store(tc.mode)
		start := time.Now()
		_, err := c.Compose(ctx, api.ComposeRequest{Name: "bad", Blocks: []string{"host1", "gpu1"}})
		if err == nil || !strings.Contains(err.Error(), "500") {
			t.Fatalf("%s: compose = %v, want a 500", tc.mode, err)
		}
		if strings.Contains(err.Error(), "JSON") || strings.Contains(err.Error(), "127.0.0.1") {
			t.Errorf("%s: the client's answer shows internals: %v", tc.mode, err)
		}
		if took := time.Since(start); took > 40*time.Second {
			t.Errorf("%s: the compose took %v, past the driver's 30 s deadline", tc.mode, took)
		}
		for deadline := time.Now().Add(10 * time.Second); !strings.Contains(s.stderr.String(), tc.logged); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Errorf("%s: serve's log lacks %q:\n%s", tc.mode, tc.logged, s.stderr.String())
				break
			}
		}
		expect("a compose on "+tc.mode, map[string][]string{})
		// Its rollback cannot read the composer either: the system stays
		// Composing, never Composed, until the answers are good again;
		// then RetryStuck rolls it back within seconds.
		systems, err := c.Systems(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, sys := range systems {
			if sys.SystemType == "Composed" && sys.Oem.Rackpool.CompositionState == "Composed" {
				t.Fatalf("%s: %s is Composed although its attach failed", tc.mode, sys.ID)
			}
		}
		mode.Store("")
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			systems, err := c.Systems(ctx)
			if err == nil && countComposed(systems) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the failed compose was not rolled back 30 s after the composer answered well", tc.mode)
			}
		}
		expect("the rollback of a compose on "+tc.mode, map[string][]string{})
	}
	mode.Store("")
	if _, err := c.Compose(ctx, api.ComposeRequest{Name: "good", Blocks: []string{"host1", "gpu1"}}); err != nil {
		t.Fatalf("the composer answers well again, but the compose fails: %v", err)
	}
	expect("a compose once the answers are good", map[string][]string{"host1": {"host1", "gpu1"}})
}
