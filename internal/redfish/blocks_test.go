package redfish_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"testing"

	"rackpool/examples"
	"rackpool/internal/tenancy"
	"rackpool/internal/topology"
)

// expandedBlocks GETs every resource block through expanded pages of
// top members as c, checks each page is what a GET of each member says,
// and returns the members by Id.
func (s *service) expandedBlocks(c cred, top string) map[string]map[string]any {
	return s.expanded(blocksColl, c, top)
}

// expanded is expandedBlocks of any collection.
func (s *service) expanded(coll string, c cred, top string) map[string]map[string]any {
	s.t.Helper()
	out := map[string]map[string]any{}
	next := coll + "?$expand=.&$top=" + top
	for next != "" {
		page := s.must(http.StatusOK, "GET", next, nil, c).json(s.t)
		for _, m := range list(s.t, page["Members"]) {
			blk, ok := m.(map[string]any)
			if !ok {
				s.t.Fatalf("member %v not expanded", m)
			}
			id, _ := blk["Id"].(string)
			read := s.must(http.StatusOK, "GET", blk["@odata.id"].(string), nil, c).json(s.t)
			if !reflect.DeepEqual(blk, read) {
				s.t.Errorf("%s on an expanded page:\n%v\nits GET:\n%v", id, blk, read)
			}
			if out[id] != nil {
				s.t.Errorf("%s twice", id)
			}
			out[id] = blk
		}
		next, _ = page["Members@odata.nextLink"].(string)
	}
	return out
}

// TestExpandedBlocksAsRead: a page of expanded blocks (written by the
// blocks themselves, odata.Renderer) says of each block what its GET says,
// in every state a block shows: failed, shared by two tenants'
// systems (each tenant sees its own), held by a memory lease, and reached
// by too many hosts to list their zones. So do pages of endpoints (host
// ports written by themselves, devices as maps) and of systems (hosts
// written, composed systems as maps).
func TestExpandedBlocksAsRead(t *testing.T) {
	s := newService(t)
	blue, red, _ := s.tenants()
	s.compose(specificBody("host1", "gpu3"))
	// Before the fault: a failing device's counters move between reads.
	if eps := s.expanded("/redfish/v1/Fabrics/falcon1/Endpoints", admin, "5"); len(eps) < 10 {
		t.Errorf("falcon1 has %d endpoints", len(eps))
	}
	s.injectFault(http.StatusNoContent, "falcon1", map[string]any{"Kind": "device-fails", "Target": "gpu3"})
	if err := s.pollFabrics(); err != nil {
		t.Fatal(err)
	}
	s.must(http.StatusCreated, "POST", systemsPath, specificBody("host2", "nic1"), blue)
	s.must(http.StatusCreated, "POST", systemsPath, specificBody("host3", "nic1"), red)
	s.startMemnode(16 << 20)
	s.must(http.StatusCreated, "POST", memoryLeases, map[string]any{"CapacityBytes": 8192, "Host": "host1", "TTLSeconds": 60}, blue)

	all := s.expandedBlocks(admin, "7") // pages that end inside a drawer's devices
	if len(all) != len(s.get(blocksColl)["Members"].([]any)) {
		t.Fatalf("%d blocks expanded, %d listed", len(all), len(s.get(blocksColl)["Members"].([]any)))
	}
	if st := dig(t, all["gpu3"], "CompositionStatus", "CompositionState"); st != "Failed" {
		t.Errorf("gpu3 %v, want Failed", st)
	}
	if n := len(list(t, dig(t, all["nic1"], "Links", "ComputerSystems"))); n != 2 {
		t.Errorf("nic1 in %d systems, want 2", n)
	}
	held := 0
	for _, b := range all {
		if dig(t, b, "Oem", "Rackpool").(map[string]any)["HeldBy"] != nil {
			held++
		}
	}
	if held != 1 {
		t.Errorf("%d blocks held by a lease, want 1", held)
	}
	// Systems: hosts (written by themselves) and composed systems (maps).
	if sys := s.expanded(systemsPath, admin, "3"); len(sys) < 6 {
		t.Errorf("%d systems expanded", len(sys))
	}
	for _, c := range []cred{blue, red} {
		composed := 0
		for _, sys := range s.expanded(systemsPath, c, "2") {
			if sys["SystemType"] == "Composed" {
				composed++
			}
		}
		if composed != 1 {
			t.Errorf("a tenant's expanded systems hold %d composed ones, want its own 1", composed)
		}
		mine := s.expandedBlocks(c, "100")
		if n := len(list(t, dig(t, mine["nic1"], "Links", "ComputerSystems"))); n != 1 {
			t.Errorf("a tenant sees nic1 in %d systems, want its own 1", n)
		}
	}

	pod, err := topology.Parse("monet-pod.yaml", examples.MONetPod)
	if err != nil {
		t.Fatal(err)
	}
	p := newServiceOn(t, pod)
	omitted := 0
	for _, b := range p.expandedBlocks(admin, "1000") {
		if dig(t, b, "Oem", "Rackpool").(map[string]any)["HostZonesOmitted"] == true {
			omitted++
		}
	}
	if omitted != 384 {
		t.Errorf("%d blocks omit their hosts' zones, want the pod's 384 memory blocks", omitted)
	}
	eps := p.expanded("/redfish/v1/Fabrics/plane1/Endpoints", admin, "50")
	if m := dig(t, eps["t1-cpu1-plane1"], "Oem", "Rackpool", "CableMetres"); m != 0.25 {
		t.Errorf("t1-cpu1's port on plane1: %v m of cable, want 0.25 (%d endpoints)", m, len(eps))
	}
}

// TestExpandedPagesConcurrently: pages of expanded blocks, systems and
// links read by several clients at once are each what the same page
// reads alone, byte for byte: a page's buffers go back to a pool once it
// is sent, and no page may carry another's bytes.
func TestExpandedPagesConcurrently(t *testing.T) {
	top, err := topology.Parse("generated", topology.GenerateRacks(3))
	if err != nil {
		t.Fatal(err)
	}
	s := newServiceOn(t, top)
	var pages []string
	for skip := 0; skip < 300; skip += 70 {
		pages = append(pages, fmt.Sprintf("%s?$expand=.&$top=70&$skip=%d", blocksColl, skip),
			fmt.Sprintf("%s?$top=90&$skip=%d", blocksColl, skip))
	}
	pages = append(pages, systemsPath+"?$expand=.&$top=25", systemsPath+"?$expand=.&$top=25&$skip=25")
	want := map[string][]byte{}
	for _, p := range pages {
		want[p] = s.must(http.StatusOK, "GET", p, nil, admin).body
	}
	const clients, reads = 6, 40
	errs := make(chan error, clients)
	for c := range clients {
		go func() {
			for i := range reads {
				p := pages[(c*7+i)%len(pages)]
				req, _ := http.NewRequest(http.MethodGet, s.srv.URL+p, nil)
				req.SetBasicAuth(tenancy.AdminUser, password)
				resp, err := s.srv.Client().Do(req)
				if err != nil {
					errs <- err
					return
				}
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusOK || !bytes.Equal(body, want[p]) {
					errs <- fmt.Errorf("GET %s: %d, %v, %d bytes (want %d)", p, resp.StatusCode, err, len(body), len(want[p]))
					return
				}
			}
			errs <- nil
		}()
	}
	for range clients {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
