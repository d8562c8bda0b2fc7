package discover

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"rackpool/internal/childproc"
	"rackpool/internal/inventory"
	"rackpool/internal/topology"
)

// repoRoot is the repository, from this package's directory.
const repoRoot = "../../.."

// need skips the test for a missing tool, or fails it under RACKPOOL_E2E=1
// (where everything must run).
func need(t *testing.T, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv("RACKPOOL_E2E") == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// mockupsDir is the DMTF mockups the repository carries
// (testdata/redfish-dmtf/mockups); a checkout without them fails the test.
func mockupsDir(t *testing.T) string {
	dir := filepath.Join(repoRoot, "testdata", "redfish-dmtf", "mockups")
	if _, err := os.Stat(filepath.Join(dir, "public-cxl", "index.json")); err != nil {
		t.Fatalf("DMTF mockups missing from the repository: %v", err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

// sushyStatic is .venv-rf's sushy-static (scripts/pyenv.sh installs it).
func sushyStatic(t *testing.T) string {
	p := os.Getenv("RACKPOOL_SUSHY_STATIC")
	if p == "" {
		p = filepath.Join(repoRoot, ".venv-rf", "bin", "sushy-static")
	}
	if _, err := os.Stat(p); err != nil {
		need(t, "sushy-static not found at %s: run scripts/pyenv.sh (or set RACKPOOL_SUSHY_STATIC)", p)
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// serveMockup starts sushy-static on the mockup and returns its URL; the
// process is killed when the test ends.
func serveMockup(t *testing.T, bin, dir string) string {
	port := freePort(t)
	cmd := childproc.Command(bin, "-m", dir, "-i", "127.0.0.1", "-p", fmt.Sprint(port))
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(base + "/redfish/v1")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return base
			}
		}
		select {
		case err := <-exited:
			t.Fatalf("sushy-static exited: %v\n%s", err, log.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("sushy-static did not answer on %s within 20s\n%s", base, log.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// disk reads a mockup's JSON directly: the expected values, independent
// of Walk.
type disk struct {
	t   *testing.T
	dir string
}

func (d disk) read(path string) map[string]any {
	rel := strings.TrimPrefix(strings.TrimPrefix(path, ServiceRoot), "/")
	b, err := os.ReadFile(filepath.Join(d.dir, filepath.FromSlash(rel), "index.json"))
	if err != nil {
		return nil
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		d.t.Fatalf("%s: %v", path, err)
	}
	return m
}

// ids returns the @odata.ids of a list of links at key (a path of keys).
func ids(m map[string]any, keys ...string) []string {
	var v any = m
	for _, k := range keys {
		mm, _ := v.(map[string]any)
		v = mm[k]
	}
	var out []string
	l, _ := v.([]any)
	for _, x := range l {
		if o, ok := x.(map[string]any); ok {
			if s, ok := o["@odata.id"].(string); ok {
				out = append(out, strings.TrimRight(s, "/"))
			}
		}
	}
	return out
}

// dirs lists the resources under a collection's directory on disk.
func (d disk) dirs(coll string) []string {
	rel := strings.TrimPrefix(strings.TrimPrefix(coll, ServiceRoot), "/")
	es, _ := os.ReadDir(filepath.Join(d.dir, filepath.FromSlash(rel)))
	var out []string
	for _, e := range es {
		if _, err := os.Stat(filepath.Join(d.dir, filepath.FromSlash(rel), e.Name(), "index.json")); e.IsDir() && err == nil {
			out = append(out, coll+"/"+e.Name())
		}
	}
	sort.Strings(out)
	return out
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	sort.Strings(s)
	return slices.Compact(s)
}

// TestMockups serves DMTF mockups with sushy-static, walks each over HTTP
// and checks what Walk found against the mockup's files, then that the
// topology compiles where the mockup has enough for one.
func TestMockups(t *testing.T) {
	if testing.Short() {
		t.Skip("starts sushy-static (not in -short)")
	}
	mockups := mockupsDir(t)
	bin := sushyStatic(t)
	tests := []struct {
		mockup string
		// compiles: false when the mockup has no fabric with an initiator.
		compiles bool
		hosts    int
		devices  int
		// with: the hosts named to Walk (a composer without Compute blocks).
		with []string
	}{
		{"public-cxl", true, 1, 3, nil},                                       // T1 (FPGA) and T2 (GPU) cannot be on cxl-memory
		{"public-cxl-multiswitch", true, 3, 3, nil},                           // the same
		{"public-expansion-box", false, 0, 0, nil},                            // no Fabrics, no Compute block: no host
		{"public-expansion-box", true, 2, 10, []string{"server1", "server2"}}, // a device per resource block
		{"public-sasfabric", true, 2, 6, nil},                                 // the tape drive has no EntityType
		{"public-nvmeof-jbof", true, 2, 1, nil},                               // the target is the JBOF's NIC
	}
	for _, tt := range tests {
		t.Run(tt.mockup, func(t *testing.T) {
			dir := filepath.Join(mockups, tt.mockup)
			base := serveMockup(t, bin, dir)
			g, err := NewHTTPGetter(HTTPOptions{URL: base, Timeout: 10 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			r, err := Walk(context.Background(), g.Get, Options{Hosts: tt.with})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s in %v:\n%s", tt.mockup, time.Since(start).Round(time.Millisecond), r.Summary())
			checkAgainstDisk(t, disk{t, dir}, r)

			d, err := r.Topology(TopologyOptions{Source: tt.mockup})
			if !tt.compiles {
				if err == nil || !strings.Contains(err.Error(), "no topology") {
					t.Fatalf("Topology: %v, want no topology", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			y, err := d.YAML()
			if err != nil {
				t.Fatal(err)
			}
			top, err := topology.Parse(tt.mockup+".yaml", y)
			if err != nil {
				t.Fatalf("%v\n%s", err, y)
			}
			if len(top.Inventory.Hosts) != tt.hosts || len(top.Inventory.Devices) != tt.devices {
				t.Errorf("%d hosts, %d devices; want %d, %d\n%s", len(top.Inventory.Hosts), len(top.Inventory.Devices), tt.hosts, tt.devices, y)
			}
			checkConvention(t, r, top)
			if tt.with != nil {
				checkExpansionBox(t, top)
			}
			if testing.Verbose() {
				t.Logf("\n%s", y)
			}
		})
	}
}

// checkAgainstDisk compares Walk's result with the mockup's files: the
// fabrics, every endpoint file of each fabric, each zone's endpoints, each
// connection, each switch's listed ports and the links between switches.
func checkAgainstDisk(t *testing.T, d disk, r *Result) {
	t.Helper()
	root := d.read(ServiceRoot)
	fl, _ := root["Fabrics"].(map[string]any)
	if fl == nil {
		// A composer: one fabric of its resource blocks, an endpoint each.
		blocks := ids(d.read(ServiceRoot+"/ResourceBlocks"), "Members")
		if r.ResourceBlocks != len(blocks) {
			t.Errorf("%d resource blocks, want %d", r.ResourceBlocks, len(blocks))
		}
		if len(r.Fabrics) != 1 || r.Composer == nil || r.Fabrics[0].Composer != r.Composer {
			t.Fatalf("a service without Fabrics: %d fabrics, composer %v", len(r.Fabrics), r.Composer)
		}
		var eps []string
		for _, e := range r.Fabrics[0].Endpoints {
			if e.Role == RoleTarget {
				eps = append(eps, e.Path)
			}
		}
		if !slices.Equal(sorted(eps), sorted(blocks)) {
			t.Errorf("composer endpoints %v, want the blocks %v", sorted(eps), sorted(blocks))
		}
		return
	}
	fabrics := ids(d.read(fl["@odata.id"].(string)), "Members")
	if len(r.Fabrics) != len(fabrics) {
		t.Fatalf("%d fabrics, want %d", len(r.Fabrics), len(fabrics))
	}
	for i, f := range r.Fabrics {
		if f.Path != fabrics[i] {
			t.Errorf("fabric %d is %s, want %s", i, f.Path, fabrics[i])
		}
		var eps []string
		for _, e := range f.Endpoints {
			eps = append(eps, e.Path)
		}
		if want := d.dirs(f.Path + "/Endpoints"); !slices.Equal(sorted(eps), want) {
			t.Errorf("fabric %s endpoints %v, want %v", f.ID, sorted(eps), want)
		}
		for _, e := range f.Endpoints {
			m := d.read(e.Path)
			if id, _ := m["Id"].(string); id != e.ID {
				t.Errorf("endpoint %s Id %q, want %q", e.Path, e.ID, id)
			}
		}
		zones := d.dirs(f.Path + "/Zones")
		if len(f.Zones) != len(zones) {
			t.Errorf("fabric %s: %d zones, want %d", f.ID, len(f.Zones), len(zones))
		}
		for _, z := range f.Zones {
			if want := sorted(ids(d.read(z.Path), "Links", "Endpoints")); !slices.Equal(sorted(z.Endpoints), want) {
				t.Errorf("zone %s holds %v, want %v", z.Path, sorted(z.Endpoints), want)
			}
		}
		if want := d.dirs(f.Path + "/Connections"); len(f.Connections) != len(want) {
			t.Errorf("fabric %s: %d connections, want %d", f.ID, len(f.Connections), len(want))
		}
		for _, c := range f.Connections {
			m := d.read(c.Path)
			want := ids(m, "Links", "InitiatorEndpoints")
			for _, gp := range ids(m, "Links", "InitiatorEndpointGroups") {
				want = append(want, ids(d.read(gp), "Links", "Endpoints")...)
			}
			if !slices.Equal(sorted(c.Initiators), sorted(want)) {
				t.Errorf("connection %s initiators %v, want %v", c.Path, c.Initiators, want)
			}
		}
		// Ports the switches list, and the links between switches: each
		// pair of ports whose ConnectedPorts name each other, once.
		switches := ids(d.read(f.Path+"/Switches"), "Members")
		if len(f.Switches) != len(switches) {
			t.Fatalf("fabric %s: %d switches, want %d", f.ID, len(f.Switches), len(switches))
		}
		var links []string
		for i, s := range f.Switches {
			ports := ids(d.read(switches[i]+"/Ports"), "Members")
			if len(s.Ports) != len(ports) {
				t.Errorf("switch %s: %d ports, want %d", s.Path, len(s.Ports), len(ports))
			}
			for _, p := range ports {
				for _, c := range ids(d.read(p), "Links", "ConnectedPorts") {
					if strings.HasPrefix(c, f.Path+"/Switches/") && !strings.HasPrefix(c, switches[i]+"/") {
						a, b := p, c
						if b < a {
							a, b = b, a
						}
						links = append(links, a+" "+b)
					}
				}
			}
		}
		if got, want := len(f.Links()), len(sorted(links)); got != want {
			t.Errorf("fabric %s: %d links %v, want %d %v", f.ID, got, f.Links(), want, sorted(links))
		}
	}
}

// checkConvention checks docs/southbound.md's naming on the compiled
// topology: each device is a target endpoint of its fabric by Id, and each
// host port's initiator endpoint is "{host}-{port}" or the port Id with an
// EntityLink into the host's system.
func checkConvention(t *testing.T, r *Result, top *topology.Topology) {
	t.Helper()
	for _, f := range r.Fabrics {
		byID := map[string]*Endpoint{}
		for _, e := range f.Endpoints {
			byID[e.ID] = e
		}
		for _, dev := range top.Inventory.Devices {
			if dev.Fabric.ID != f.ID {
				continue
			}
			if e := byID[dev.ID]; e == nil || e.Role != RoleTarget {
				t.Errorf("device %s is no target endpoint of fabric %s", dev.ID, f.ID)
			}
		}
		for _, h := range top.Inventory.Hosts {
			for _, p := range h.Ports {
				if p.Fabric.ID != f.ID {
					continue
				}
				e := byID[h.ID+"-"+p.ID]
				if e == nil {
					e = byID[p.ID]
					if e != nil && !slices.ContainsFunc(e.Entities, func(en *Entity) bool { return systemPath(en.Link) == ServiceRoot+"/Systems/"+h.ID }) {
						e = nil
					}
				}
				if e == nil && byID[h.ID] != nil && p.ID == f.ID {
					continue // an initiator without system link or {host}-{port} Id: noted in the file
				}
				if e == nil || e.Role != RoleInitiator {
					t.Errorf("host %s port %s has no initiator endpoint by the convention", h.ID, p.ID)
				}
			}
		}
	}
}

// checkExpansionBox checks the topology of DMTF's public-expansion-box
// against its files: a device per resource block, its kind and capacity
// from what the block holds (Tray1-SAS: four 256 GiB SAS SSDs, one device
// of 1 TiB; Tray3-Memory: four 8 GiB DIMMs), the named hosts on the
// composer's fabric, and the fabric emulated: the box has no
// CompositionService to compose through.
func checkExpansionBox(t *testing.T, top *topology.Topology) {
	t.Helper()
	const gib = int64(1) << 30
	want := map[string]struct {
		kind     inventory.Kind
		capacity int64
	}{
		"Tray1-SAS": {inventory.SSD, 4 * 256 * gib}, "Tray2-Drive1": {inventory.NVMe, 256 * gib}, "Tray2-Drive4": {inventory.NVMe, 256 * gib},
		"Tray3-Memory": {inventory.Memory, 32 * gib}, "Tray4-NIC1": {inventory.NIC, 0}, "Tray4-NIC4": {inventory.NIC, 0},
	}
	for id, w := range want {
		dev := top.Inventory.Device(id)
		if dev == nil {
			t.Errorf("no device %s", id)
			continue
		}
		if dev.Kind != w.kind || (w.capacity > 0 && dev.CapacityBytes != w.capacity) {
			t.Errorf("device %s: %s of %d bytes, want %s of %d", id, dev.Kind, dev.CapacityBytes, w.kind, w.capacity)
		}
	}
	f := top.Inventory.Fabric(DefaultComposerFabric)
	if f == nil || f.Kind != inventory.PCIeSwitch || f.Driver != topology.DriverEmulated || f.Manager != nil {
		t.Fatalf("the composer's fabric: %+v", f)
	}
	for _, h := range []string{"server1", "server2"} {
		host := top.Inventory.Host(h)
		if host == nil || len(host.Ports) != 1 || host.Ports[0].Fabric != f {
			t.Errorf("host %s: %+v", h, host)
		}
	}
}
