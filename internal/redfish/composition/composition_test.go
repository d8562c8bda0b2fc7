package composition

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"rackpool/internal/compose"
	"rackpool/internal/inventory"
	"rackpool/internal/redfish/service"
	"rackpool/internal/rf"
	"rackpool/internal/schedule"
)

// core is a hand-written Core: it maps errors as the service's core does
// for the two kinds these tests raise, hides with a plain 404, and runs
// every request at once.
type core struct{}

func (core) Hide(_ *http.Request, kind, id string) error { return rf.NotFound(kind, id) }

func (core) Async(w http.ResponseWriter, r *http.Request, _ time.Duration, fn func(http.ResponseWriter, *http.Request) error) error {
	return fn(w, r)
}

func (core) InCommit(r *http.Request, _ int) context.Context { return r.Context() }

func (core) Problem(err error) *rf.Problem {
	var p *rf.Problem
	if errors.As(err, &p) {
		c := *p
		c.Args, c.Related = slices.Clone(p.Args), slices.Clone(p.Related)
		return &c
	}
	return rf.New(http.StatusConflict, rf.Registry+"ResourceInUse", err.Error())
}

func post(body string) *http.Request {
	return httptest.NewRequest(http.MethodPost, "/redfish/v1/Systems", strings.NewReader(body))
}

// TestToRequest: the DMTF shape of a constrained request and rackpool's
// precise one become one compose.Request; what cannot be asked for is
// refused with the property at fault.
func TestToRequest(t *testing.T) {
	s := &Service{core: core{}}
	var body composeRequest
	if err := decode(post(`{
		"Processors": {"Members": [{"ProcessorType": "CPU", "TotalCores": 16},
			{"ProcessorType": "GPU", "@Redfish.RequestedCount": 2, "Model": "A100"}]},
		"Memory": {"Members": [{"@Redfish.RequestedCount": 2, "CapacityMiB": 1024}]},
		"Storage": {"Members": [{"@Redfish.RequestedCount": 1, "Protocol": "NVMe"}, {"@Redfish.RequestedCount": 3, "MediaType": "HDD"}]},
		"Oem": {"Rackpool": {"Host": "host1", "Needs": [{"Kind": "FPGA", "Count": 1, "Capacity": "64GiB"}]}}}`), &body); err != nil {
		t.Fatal(err)
	}
	req, err := body.toRequest()
	if err != nil {
		t.Fatal(err)
	}
	want := []schedule.Need{
		{Kind: inventory.GPU, Count: 2, Model: "A100"},
		{Kind: inventory.Memory, CapacityBytes: 2 << 30, Exact: true},
		{Kind: inventory.NVMe, Count: 1, Exact: true},
		{Kind: inventory.HDD, Count: 3, Exact: true},
		{Kind: inventory.FPGA, Count: 1, CapacityBytes: 64 << 30},
	}
	if req.MinCores != 16 || req.Host != "host1" || len(req.Needs) != len(want) {
		t.Fatalf("request %+v", req)
	}
	for i, n := range want {
		got := req.Needs[i]
		if got.Kind != n.Kind || got.Count != n.Count || got.Model != n.Model || got.CapacityBytes != n.CapacityBytes || got.Exact != n.Exact {
			t.Errorf("need %d = %+v, want %+v", i, got, n)
		}
	}

	for _, c := range []struct{ body, related string }{
		{`{"Processors": {"Members": [{"ProcessorType": "DSP"}]}}`, "#/Processors/Members/0/ProcessorType"},
		{`{"Storage": {"Members": [{"@Redfish.RequestedCount": 0}]}}`, "#/Storage/Members/0/@Redfish/RequestedCount"},
		{`{"Links": {"ResourceBlocks": [{"@odata.id": "/redfish/v1/Systems/x"}]}}`, "#/Links/ResourceBlocks/0"},
		{`{"Oem": {"Rackpool": {"Needs": [{"Kind": "gpu", "Capacity": "lots"}]}}}`, "#/Oem/Rackpool/Needs/0/Capacity"},
	} {
		var body composeRequest
		if err := decode(post(c.body), &body); err != nil {
			t.Fatal(err)
		}
		_, err := body.toRequest()
		p := s.core.Problem(err)
		if err == nil || p.Status != http.StatusBadRequest || !slices.Contains(p.Related, c.related) {
			t.Errorf("%s: %v (related %v), want 400 about %s", c.body, err, p.Related, c.related)
		}
	}
}

// TestISODuration: what the CompositionService writes as its
// ReservationDuration it reads back; what is not an ISO 8601 duration is
// refused.
func TestISODuration(t *testing.T) {
	for _, d := range []time.Duration{time.Second, 5 * time.Minute, 90 * time.Minute, 26*time.Hour + 3*time.Second} {
		got, err := parseISODuration(service.ISODuration(d))
		if err != nil || got != d {
			t.Errorf("%s -> %s: %v, %v", d, service.ISODuration(d), got, err)
		}
	}
	if d, err := parseISODuration("P1DT2H"); err != nil || d != 26*time.Hour {
		t.Errorf("P1DT2H = %v, %v", d, err)
	}
	for _, bad := range []string{"", "5M", "PT", "P1H", "PT1D", "PTxS", "PT5"} {
		if _, err := parseISODuration(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestStanzaWording: a stanza's refusal names the stanza, and a property
// error inside a stanza's request names the property by its path in the
// manifest, in the message, its argument and RelatedProperties.
func TestStanzaWording(t *testing.T) {
	s := &Service{core: core{}}
	err := s.prefixProperty(rf.PropertyValue("Links.ResourceBlocks[0]", "x", "Use a link."), "Manifest.Stanzas[2].Request.")
	var p *rf.Problem
	if !errors.As(err, &p) {
		t.Fatalf("%T %v", err, err)
	}
	if p.Args[0] != "Manifest.Stanzas[2].Request.Links.ResourceBlocks[0]" || !strings.Contains(p.Text, "Manifest.Stanzas[2].Request.Links") ||
		!slices.Equal(p.Related, []string{"#/Manifest/Stanzas/2/Request/Links/ResourceBlocks/0"}) {
		t.Errorf("prefixed: %+v", p)
	}

	err = s.namedStanzaError(&compose.StanzaError{Index: 1, Err: compose.ErrBusy}, []string{"web", "db"})
	if !errors.As(err, &p) || !strings.HasPrefix(p.Resolution, "Stanza db failed") {
		t.Errorf("named: %v (%+v)", err, p)
	}
	other := errors.New("not a stanza's")
	if got := s.namedStanzaError(other, []string{"web"}); got != other {
		t.Errorf("an error of no stanza became %v", got)
	}
}

// TestParseAllocation: an export document is read strictly.
func TestParseAllocation(t *testing.T) {
	a, err := ParseAllocation([]byte(`{"format": "` + AllocationFormat + `", "topology": "rack", "tenants": [],
		"systems": [{"name": "s1", "host": "host1", "blocks": ["gpu1"]}]}`))
	if err != nil || len(a.Systems) != 1 || a.Systems[0].Blocks[0] != "gpu1" {
		t.Fatalf("%+v, %v", a, err)
	}
	for _, bad := range []string{
		`{"format": "rackpool-allocation/0", "systems": []}`,
		`{"format": "` + AllocationFormat + `", "systems": [], "accounts": []}`,
		`{"format": "` + AllocationFormat + `", "systems": {}}`,
	} {
		if _, err := ParseAllocation([]byte(bad)); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}
