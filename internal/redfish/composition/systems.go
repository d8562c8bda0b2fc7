package composition

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"rackpool/internal/compose"
	"rackpool/internal/inventory"
	"rackpool/internal/observe"
	"rackpool/internal/odata"
	"rackpool/internal/redfish/service"
	"rackpool/internal/rf"
	"rackpool/internal/schedule"
	"rackpool/internal/store"
	"rackpool/internal/units"
)

// composer is what the systems' handlers need of the composition manager
// (compose.Manager): composing (in one walk, Place then Realize, or
// Compose), changing and decomposing systems, and planning without
// committing.
type composer interface {
	Place(ctx context.Context, req compose.Request) (*compose.Placement, error)
	Compose(ctx context.Context, req compose.Request) (*inventory.Composition, error)
	Update(ctx context.Context, id string, ur compose.UpdateRequest) (*inventory.Composition, error)
	Decompose(ctx context.Context, id string, expectVersion int64) error
	Get(id string) (*inventory.Composition, error)
	List() []*inventory.Composition
	// SystemIDs is List's IDs in its order, shared: not to be modified.
	SystemIDs() []string
	Plan(req compose.Request) (*schedule.Plan, error)
	EstimateFabricTime(blocks []string) time.Duration
	BlockStatus(id string) compose.BlockStatus
}

// systemRoutes are the routes of Systems: hosts and composed systems, and their actions.
var systemRoutes = []service.Route[*Service]{
	{Pattern: "GET /redfish/v1/Systems", Priv: service.Login, Handler: (*Service).getSystems},
	{Pattern: "POST /redfish/v1/Systems", Priv: service.ConfigureComponents, Handler: (*Service).postSystem},
	{Pattern: "GET /redfish/v1/Systems/{id}", Priv: service.Login, Handler: (*Service).getSystem},
	{Pattern: "PATCH /redfish/v1/Systems/{id}", Priv: service.ConfigureComponents, Handler: (*Service).patchSystem},
	{Pattern: "DELETE /redfish/v1/Systems/{id}", Priv: service.ConfigureComponents, Handler: (*Service).deleteSystem},
	{Pattern: "POST /redfish/v1/Systems/{id}/Actions/ComputerSystem.AddResourceBlock", Priv: service.ConfigureComponents, Handler: (*Service).addResourceBlock},
	{Pattern: "POST /redfish/v1/Systems/{id}/Actions/ComputerSystem.RemoveResourceBlock", Priv: service.ConfigureComponents, Handler: (*Service).removeResourceBlock},
	{Pattern: "POST /redfish/v1/Systems/{id}/Actions/Oem/Rackpool.Expand", Priv: service.ConfigureComponents, Handler: (*Service).expandSystem},
	{Pattern: "POST /redfish/v1/Systems/{id}/Actions/Oem/Rackpool.Shrink", Priv: service.ConfigureComponents, Handler: (*Service).shrinkSystem},
}

// composeRequest is the body of POST /redfish/v1/Systems. Specific
// composition lists Links.ResourceBlocks; constrained composition asks for
// counts, either in the DMTF shape (Processors, Memory, Storage,
// NetworkInterfaces members with @Redfish.RequestedCount) or precisely
// under Oem.Rackpool.
type composeRequest struct {
	Name                  string
	Description           string
	ZoneAffinity          *string `json:"@Redfish.ZoneAffinity"`
	AllowOverprovisioning *bool   `json:"@Redfish.AllowOverprovisioning"`
	Links                 *struct {
		ResourceBlocks []rf.ODataID
	}
	Processors *struct {
		Members []struct {
			RequestedCount int `json:"@Redfish.RequestedCount"`
			ProcessorType  string
			Model          string
			TotalCores     int
		}
	}
	Memory *struct {
		Members []struct {
			RequestedCount int `json:"@Redfish.RequestedCount"`
			CapacityMiB    int64
		}
	}
	Storage *struct {
		Members []struct {
			RequestedCount int `json:"@Redfish.RequestedCount"`
			CapacityBytes  int64
			MediaType      string // SSD or HDD
			Protocol       string // NVMe, SAS
		}
	}
	NetworkInterfaces *struct {
		Members []struct {
			RequestedCount int `json:"@Redfish.RequestedCount"`
			Model          string
		}
	}
	Oem *struct {
		Rackpool *OemCompose
	}
}

// OemCompose is the precise form of a constrained request.
type OemCompose struct {
	Host         string
	Zone         string
	Affinity     string
	MinCores     int
	MinMemoryGiB int
	Needs        []OemNeed
}

// OemNeed asks for blocks of one kind.
type OemNeed struct {
	Kind         string
	Count        int
	Capacity     string // e.g. 64GiB (memory: total; others: per block)
	Model        string
	Attributes   map[string]string
	MaxLatencyNS float64
}

func blockIDFromRef(r rf.ODataID, prop string) (string, error) {
	if !strings.HasPrefix(r.ID, service.BlocksPath) || strings.Contains(r.ID[len(service.BlocksPath):], "/") || r.ID == service.BlocksPath {
		return "", rf.PropertyValue(prop, r.ID, "Use links of the form "+service.BlocksPath+"{Id}.")
	}
	return r.ID[len(service.BlocksPath):], nil
}

// toRequest converts the body into a scheduler request.
func (c *composeRequest) toRequest() (compose.Request, error) {
	var req compose.Request
	if c.Links != nil {
		for i, l := range c.Links.ResourceBlocks {
			id, err := blockIDFromRef(l, fmt.Sprintf("Links.ResourceBlocks[%d]", i))
			if err != nil {
				return req, err
			}
			req.Blocks = append(req.Blocks, id)
		}
	}
	if c.Processors != nil {
		for i, m := range c.Processors.Members {
			prop := fmt.Sprintf("Processors.Members[%d]", i)
			switch strings.ToUpper(m.ProcessorType) {
			case "CPU":
				req.MinCores = m.TotalCores
			case "GPU", "FPGA":
				if m.RequestedCount < 1 {
					return req, rf.PropertyValue(prop+".@Redfish.RequestedCount", strconv.Itoa(m.RequestedCount), "Ask for at least 1.")
				}
				req.Needs = append(req.Needs, schedule.Need{Kind: inventory.Kind(strings.ToLower(m.ProcessorType)), Count: m.RequestedCount, Model: m.Model})
			default:
				return req, rf.PropertyValue(prop+".ProcessorType", m.ProcessorType, "Use CPU, GPU or FPGA.")
			}
		}
	}
	if c.Memory != nil {
		for i, m := range c.Memory.Members {
			if m.RequestedCount < 1 || m.CapacityMiB < 1 {
				return req, rf.PropertyValue(fmt.Sprintf("Memory.Members[%d]", i), fmt.Sprint(m.CapacityMiB), "Ask for a RequestedCount of at least 1 and a CapacityMiB of at least 1.")
			}
			req.Needs = append(req.Needs, schedule.Need{Kind: inventory.Memory, CapacityBytes: int64(m.RequestedCount) * m.CapacityMiB << 20, Exact: true})
		}
	}
	if c.Storage != nil {
		for i, m := range c.Storage.Members {
			prop := fmt.Sprintf("Storage.Members[%d]", i)
			if m.RequestedCount < 1 {
				return req, rf.PropertyValue(prop+".@Redfish.RequestedCount", strconv.Itoa(m.RequestedCount), "Ask for at least 1.")
			}
			kind := inventory.SSD
			switch {
			case strings.EqualFold(m.Protocol, "NVMe"):
				kind = inventory.NVMe
			case strings.EqualFold(m.MediaType, "HDD"):
				kind = inventory.HDD
			case m.MediaType == "" || strings.EqualFold(m.MediaType, "SSD"):
			default:
				return req, rf.PropertyValue(prop+".MediaType", m.MediaType, "Use SSD or HDD.")
			}
			req.Needs = append(req.Needs, schedule.Need{Kind: kind, Count: m.RequestedCount, CapacityBytes: m.CapacityBytes, Exact: true})
		}
	}
	if c.NetworkInterfaces != nil {
		for i, m := range c.NetworkInterfaces.Members {
			if m.RequestedCount < 1 {
				return req, rf.PropertyValue(fmt.Sprintf("NetworkInterfaces.Members[%d].@Redfish.RequestedCount", i), strconv.Itoa(m.RequestedCount), "Ask for at least 1.")
			}
			req.Needs = append(req.Needs, schedule.Need{Kind: inventory.NIC, Count: m.RequestedCount, Model: m.Model})
		}
	}
	if c.Oem != nil && c.Oem.Rackpool != nil {
		o := c.Oem.Rackpool
		req.Host, req.Zone, req.Affinity = o.Host, o.Zone, schedule.Affinity(o.Affinity)
		req.MinCores, req.MinMemoryGiB = max(req.MinCores, o.MinCores), o.MinMemoryGiB
		needs, err := oemNeeds(o.Needs, "Oem.Rackpool.Needs")
		if err != nil {
			return req, err
		}
		req.Needs = append(req.Needs, needs...)
	}
	return req, nil
}

func oemNeeds(in []OemNeed, prop string) ([]schedule.Need, error) {
	var out []schedule.Need
	for i, n := range in {
		p := fmt.Sprintf("%s[%d]", prop, i)
		need := schedule.Need{Kind: inventory.Kind(strings.ToLower(n.Kind)), Count: n.Count, Model: n.Model, Attrs: n.Attributes, MaxLatencyNS: n.MaxLatencyNS}
		if n.Capacity != "" {
			c, err := units.ParseBytes(n.Capacity)
			if err != nil {
				return nil, rf.PropertyValue(p+".Capacity", n.Capacity, err.Error())
			}
			need.CapacityBytes = c
		}
		out = append(out, need)
	}
	return out, nil
}

// hostFromBlocks moves a compute block named among the links into
// req.Host.
func (s *Service) hostFromBlocks(req *compose.Request) error {
	var rest []string
	for _, id := range req.Blocks {
		b := s.top.Block(id)
		if b != nil && b.Host != nil {
			if req.Host != "" && req.Host != b.Host.ID {
				return rf.PropertyValue("Links.ResourceBlocks", id, "A composition has exactly one compute block.")
			}
			req.Host = b.Host.ID
			continue
		}
		rest = append(rest, id)
	}
	req.Blocks = rest
	return nil
}

// readCompose decodes a composition request body (POST Systems, Explain)
// into the body and the composition request. The request's annotations
// @Redfish.ZoneAffinity and @Redfish.AllowOverprovisioning go into it as
// they are: compose applies the composition policy to them (policyError
// words its refusals).
func (s *Service) readCompose(r *http.Request) (composeRequest, compose.Request, error) {
	var body composeRequest
	if err := decode(r, &body); err != nil {
		return body, compose.Request{}, err
	}
	req, err := body.toRequest()
	if err != nil {
		return body, req, err
	}
	req.Overprovision = body.AllowOverprovisioning != nil && *body.AllowOverprovisioning
	req.ZoneAffinity = body.ZoneAffinity
	if err := s.hostFromBlocks(&req); err != nil {
		return body, req, err
	}
	if len(req.Blocks) == 0 && len(req.Needs) == 0 && req.Host == "" {
		return body, req, rf.PropertyMissing("Links.ResourceBlocks")
	}
	return body, req, nil
}

// postSystem composes in one walk: Place schedules once and holds the
// blocks, whose modelled fabric time decides between answering at once and
// answering 202 with a task monitor; Realize makes the system.
func (s *Service) postSystem(w http.ResponseWriter, r *http.Request) error {
	body, req, err := s.readCompose(r)
	if err != nil {
		return err
	}
	req.Name, req.Description, req.Tenant = body.Name, body.Description, service.Principal(r).Tenant
	req.Quota, req.Check = s.quotaOf(r)
	start := time.Now()
	p, err := s.mgr.Place(r.Context(), req)
	if err != nil {
		s.composeLat.With(observe.Outcome(err)).Observe(time.Since(start).Seconds())
		if perr := policyError(err, req); perr != err {
			return perr
		}
		// Refused as Compose refuses it: in the task when one is asked for.
		return s.core.Async(w, r, 0, func(http.ResponseWriter, *http.Request) error { return err })
	}
	return s.core.Async(w, r, p.EstimateFabricTime(), func(w http.ResponseWriter, r *http.Request) error {
		c, err := p.Realize(s.core.InCommit(r, http.StatusCreated))
		s.composeLat.With(observe.Outcome(err)).Observe(time.Since(start).Seconds())
		if err != nil {
			return err
		}
		service.NoteDetail(r, "composed "+c.ID)
		w.Header().Set("Location", "/redfish/v1/Systems/"+c.ID)
		s.writeSystem(w, r, http.StatusCreated, c)
		return nil
	})
}

// ifMatch returns the version an If-Match header asks for, 0 when absent.
func ifMatch(r *http.Request) (int64, error) {
	h := r.Header.Get("If-Match")
	if h == "" || h == "*" {
		return 0, nil
	}
	v := strings.TrimPrefix(strings.Trim(strings.TrimPrefix(h, "W/"), `"`), "")
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 1 {
		// An ETag we never issued cannot match.
		return -1, nil
	}
	return n, nil
}

func (s *Service) getSystems(w http.ResponseWriter, r *http.Request) error {
	head := rf.Collection("/redfish/v1/Systems", "ComputerSystemCollection", "Computer System Collection", nil)
	delete(head, "Members")
	delete(head, "Members@odata.count")
	head["@Redfish.CollectionCapabilities"] = map[string]any{
		"@odata.type": "#CollectionCapabilities.v1_4_0.CollectionCapabilities",
		"Capabilities": []any{map[string]any{
			"CapabilitiesObject": rf.Ref("/redfish/v1/Systems"),
			"UseCase":            "ComputerSystemComposition",
			"Links":              map[string]any{"TargetCollection": rf.Ref("/redfish/v1/Systems")},
		}},
	}
	// A page of systems reads the free hosts' power records once.
	r = r.WithContext(compose.WithHostPowers(r.Context()))
	service.WriteJSON(w, http.StatusOK, &odata.Collection{Head: head, Members: s.systemList(r)})
	return nil
}

// systemList is the systems a client sees: the physical hosts in
// topology order, then the composed systems in the order they were
// created (odata.Members).
type systemList struct {
	s     *Service
	r     *http.Request
	hosts []*inventory.Host
	comps []string
}

func (s *Service) systemList(r *http.Request) *systemList {
	p := service.Principal(r)
	l := &systemList{s: s, r: r, hosts: s.top.Hosts, comps: s.mgr.SystemIDs()}
	if p.Tenant != "" {
		l.hosts = nil
		for _, h := range s.top.Hosts {
			if s.visibleBlock(p, h.Block) {
				l.hosts = append(l.hosts, h)
			}
		}
		l.comps = s.visibleSystems(p, l.comps)
	}
	return l
}

// Len implements odata.Members.
func (l *systemList) Len() int { return len(l.hosts) + len(l.comps) }

// Path implements odata.Members.
func (l *systemList) Path(i int) string { return "/redfish/v1/Systems/" + l.id(i) }

func (l *systemList) id(i int) string {
	if i < len(l.hosts) {
		return l.hosts[i].ID
	}
	return l.comps[i-len(l.hosts)]
}

// AppendBody implements odata.Renderer: a host's system is written, a
// composed system's map encoded.
func (l *systemList) AppendBody(w []byte, i int) ([]byte, bool) {
	if i < len(l.hosts) {
		return l.s.appendHost(w, l.r, l.hosts[i]), true
	}
	v := l.Body(i)
	if v == nil {
		return w, false
	}
	raw, err := odata.Marshal(v)
	if err != nil {
		return w, false
	}
	return append(w, raw...), true
}

// Body implements odata.Bodies: the system as its GET answers it (nil for
// one decomposed since the list was taken).
func (l *systemList) Body(i int) any {
	if i < len(l.hosts) {
		return l.s.hostJSON(l.r, l.hosts[i])
	}
	c, err := l.s.mgr.Get(l.comps[i-len(l.hosts)])
	if err != nil {
		return nil
	}
	return l.s.systemWithPower(l.r, c)
}

// Where implements odata.Index for SystemType and, read from the
// composition records, Oem/Rackpool/Host and Oem/Rackpool/CompositionState.
func (l *systemList) Where(path, value string) (odata.Members, bool) {
	var pos []int
	comps := func(match func(c *inventory.Composition) bool) {
		for i, id := range l.comps {
			if c, err := l.s.mgr.Get(id); err == nil && match(c) {
				pos = append(pos, len(l.hosts)+i)
			}
		}
	}
	switch path {
	case "SystemType":
		first, last := 0, 0
		switch value {
		case "Physical":
			last = len(l.hosts)
		case "Composed":
			first, last = len(l.hosts), l.Len()
		}
		for i := first; i < last; i++ {
			pos = append(pos, i)
		}
	case "Oem/Rackpool/Host":
		comps(func(c *inventory.Composition) bool { return c.Host == value })
	case "Oem/Rackpool/CompositionState":
		comps(func(c *inventory.Composition) bool { return string(c.State) == value })
	default:
		return nil, false
	}
	return odata.NewSub(l, pos), true
}

func (s *Service) getSystem(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if h := s.top.Host(id); h != nil {
		if !s.visibleBlock(service.Principal(r), h.Block) {
			return s.core.Hide(r, "ComputerSystem", id)
		}
		service.WriteJSON(w, http.StatusOK, s.hostJSON(r, h))
		return nil
	}
	c, err := s.systemVisible(r, id)
	if err != nil {
		return err
	}
	s.writeSystem(w, r, http.StatusOK, c)
	return nil
}

// writeSystem answers with composition c's body and its power state (a
// BMC's live word where the host has one).
func (s *Service) writeSystem(w http.ResponseWriter, r *http.Request, status int, c *inventory.Composition) {
	w.Header().Set("ETag", service.ETag(c.Version))
	service.WriteJSON(w, status, s.systemWithPower(r, c))
}

// systemWithPower is composition c's body with its power state.
func (s *Service) systemWithPower(r *http.Request, c *inventory.Composition) map[string]any {
	body := s.systemBody(c)
	ps, ok := s.powerOf(r.Context(), c.ID)
	if !ok {
		ps.Power = c.Power
	}
	addPower(body, c.ID, ps)
	return body
}

// hostJSON is host h's system as r's client GETs it.
func (s *Service) hostJSON(r *http.Request, h *inventory.Host) json.RawMessage {
	return s.appendHost(nil, r, h)
}

func (s *Service) systemBody(c *inventory.Composition) map[string]any {
	h := s.top.Host(c.Host)
	var links []rf.ODataID
	var blocks []map[string]any
	chassis := []rf.ODataID{rf.Reff("/redfish/v1/Chassis/%s", h.Rack)}
	seen := map[string]bool{}
	pooled := int64(0)
	counts := map[inventory.Kind]int{}
	pcieDevices, pcieFunctions := []rf.ODataID{}, []rf.ODataID{}
	for _, id := range c.Blocks {
		links = append(links, rf.Ref(service.BlocksPath+id))
		b := s.top.Block(id)
		if b == nil {
			continue
		}
		counts[b.Kind]++
		entry := map[string]any{"Id": id, "Kind": b.Kind}
		if b.Device != nil {
			if p, ok := s.top.Path(h, b); ok {
				entry["RoundTripNs"] = p.RTTNS
				entry["Hops"] = p.Hops
			}
			entry["HostPort"] = c.Ports[id]
			entry["Fabric"] = b.Device.Fabric.ID
			if d := b.Device; d.Drawer != nil && !seen[d.Fabric.ID+"-"+d.Drawer.ID] {
				seen[d.Fabric.ID+"-"+d.Drawer.ID] = true
				chassis = append(chassis, rf.Reff("/redfish/v1/Chassis/%s-%s", d.Fabric.ID, d.Drawer.ID))
			}
			if b.Kind == inventory.Memory {
				pooled += b.CapacityBytes
			}
			if fn := service.PCIeFunctionPath(b.Device); fn != "" && !slices.Contains(pcieFunctions, rf.Ref(fn)) {
				pcieDevices = append(pcieDevices, rf.Ref(strings.TrimSuffix(fn, "/PCIeFunctions/1")))
				pcieFunctions = append(pcieFunctions, rf.Ref(fn))
			}
		}
		blocks = append(blocks, entry)
	}
	state := "Enabled"
	if c.State != inventory.Composed {
		state = "Starting"
	}
	body := map[string]any{
		"@odata.id":          "/redfish/v1/Systems/" + c.ID,
		"@odata.type":        "#ComputerSystem.v1_22_0.ComputerSystem",
		"@odata.etag":        service.ETag(c.Version),
		"Id":                 c.ID,
		"Name":               c.Name,
		"Description":        c.Description,
		"SystemType":         "Composed",
		"Status":             map[string]string{"State": state, "Health": "OK"},
		"ProcessorSummary":   map[string]any{"CoreCount": h.Cores, "Count": 1 + counts[inventory.GPU] + counts[inventory.FPGA]},
		"MemorySummary":      map[string]any{"TotalSystemMemoryGiB": float64(h.MemoryGiB) + float64(pooled)/float64(units.GiB)},
		"Links":              map[string]any{"ResourceBlocks": links, "Chassis": chassis},
		"Processors":         rf.Ref("/redfish/v1/Systems/" + c.ID + "/Processors"),
		"Memory":             rf.Ref("/redfish/v1/Systems/" + c.ID + "/Memory"),
		"Storage":            rf.Ref("/redfish/v1/Systems/" + c.ID + "/Storage"),
		"EthernetInterfaces": rf.Ref("/redfish/v1/Systems/" + c.ID + "/EthernetInterfaces"),
		// The PCIe devices composed into it, as their drawer lists them.
		"PCIeDevices":   pcieDevices,
		"PCIeFunctions": pcieFunctions,
		"Actions": map[string]any{
			"#ComputerSystem.AddResourceBlock":    map[string]string{"target": "/redfish/v1/Systems/" + c.ID + "/Actions/ComputerSystem.AddResourceBlock"},
			"#ComputerSystem.RemoveResourceBlock": map[string]string{"target": "/redfish/v1/Systems/" + c.ID + "/Actions/ComputerSystem.RemoveResourceBlock"},
			"Oem": map[string]any{
				"#Rackpool.Expand": map[string]string{"target": "/redfish/v1/Systems/" + c.ID + "/Actions/Oem/Rackpool.Expand"},
				"#Rackpool.Shrink": map[string]string{"target": "/redfish/v1/Systems/" + c.ID + "/Actions/Oem/Rackpool.Shrink"},
			},
		},
		"Oem": service.RackpoolOem("ComputerSystem", map[string]any{
			"CompositionState": c.State,
			"Version":          c.Version,
			"Host":             c.Host,
			"Blocks":           blocks,
			"Adding":           service.NonNil(c.Adding),
			"Removing":         service.NonNil(c.Removing),
			"Created":          c.CreatedAt.Format("2006-01-02T15:04:05.000Z07:00"),
			"Updated":          c.UpdatedAt.Format("2006-01-02T15:04:05.000Z07:00"),
		}),
	}
	if c.Description == "" {
		delete(body, "Description") // DSP0266: omit rather than send ""
	}
	return body
}

func (s *Service) patchSystem(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if err := s.powerSystem(r, id); err != nil {
		return err
	}
	var body struct {
		Links *struct {
			ResourceBlocks *[]rf.ODataID
		}
		Boot *bootPatch
	}
	if err := decode(r, &body); err != nil {
		return err
	}
	host := s.top.Host(id)
	if host != nil && body.Links != nil {
		return rf.PropertyValue("Links.ResourceBlocks", id, "Physical hosts are not composed systems; compose one with POST /redfish/v1/Systems.")
	}
	if body.Boot == nil && (body.Links == nil || body.Links.ResourceBlocks == nil) {
		return rf.PropertyMissing("Links.ResourceBlocks")
	}
	want := s.versionFor(r, id)
	var blocks []string
	if body.Links != nil {
		if body.Links.ResourceBlocks == nil {
			return rf.PropertyMissing("Links.ResourceBlocks")
		}
		blocks = []string{} // not nil: an empty list asks to remove every block
		for i, l := range *body.Links.ResourceBlocks {
			bid, err := blockIDFromRef(l, fmt.Sprintf("Links.ResourceBlocks[%d]", i))
			if err != nil {
				return err
			}
			if s.top.Block(bid) == nil {
				return fmt.Errorf("%w %q", schedule.ErrUnknownBlock, bid)
			}
			blocks = append(blocks, bid)
		}
	}
	if body.Boot != nil {
		if err := s.setBoot(r, id, body.Boot, want); err != nil {
			return err
		}
		service.NoteDetail(r, "boot override of "+id)
		want = 0 // the If-Match guard checked it; the boot change moved the version on
	}
	if host != nil {
		service.WriteJSON(w, http.StatusOK, s.hostJSON(r, host))
		return nil
	}
	var c *inventory.Composition
	var err error
	if blocks != nil {
		ur := compose.UpdateRequest{Version: want, Set: blocks}
		ur.Quota, ur.Check = s.quotaOf(r)
		ctx := s.core.InCommit(r, http.StatusOK)
		if body.Boot != nil {
			ctx = store.WithPendingAudit(r.Context(), nil) // the boot change's commit recorded the request
		}
		c, err = s.mgr.Update(ctx, id, ur)
	} else {
		c, err = s.mgr.Get(id)
	}
	if err != nil {
		return err
	}
	s.writeSystem(w, r, http.StatusOK, c)
	return nil
}

func (s *Service) deleteSystem(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if s.top.Host(id) != nil {
		e := rf.New(http.StatusMethodNotAllowed, rf.Registry+"ResourceCannotBeDeleted",
			"The delete request failed because the resource requested cannot be deleted.")
		e.Resolution = id + " is a physical host, not a composed system."
		w.Header().Set("Allow", "GET")
		return e
	}
	if _, err := s.systemVisible(r, id); err != nil {
		return err
	}
	want, err := ifMatch(r)
	if err != nil {
		return err
	}
	if err := s.mgr.Decompose(s.core.InCommit(r, http.StatusNoContent), id, want); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

type blockAction struct {
	ResourceBlock      *rf.ODataID
	ResourceBlockETag  string
	ComputerSystemETag string
}

func (s *Service) blockActionTarget(r *http.Request) (string, int64, error) {
	if _, err := s.systemVisible(r, r.PathValue("id")); err != nil {
		return "", 0, err
	}
	var body blockAction
	if err := decode(r, &body); err != nil {
		return "", 0, err
	}
	if body.ResourceBlock == nil {
		return "", 0, rf.PropertyMissing("ResourceBlock")
	}
	bid, err := blockIDFromRef(*body.ResourceBlock, "ResourceBlock")
	if err != nil {
		return "", 0, err
	}
	if s.top.Block(bid) == nil {
		return "", 0, fmt.Errorf("%w %q", schedule.ErrUnknownBlock, bid)
	}
	want := int64(0)
	if body.ComputerSystemETag != "" {
		r.Header.Set("If-Match", body.ComputerSystemETag)
	}
	want, _ = ifMatch(r)
	return bid, want, nil
}

func (s *Service) addResourceBlock(w http.ResponseWriter, r *http.Request) error {
	bid, want, err := s.blockActionTarget(r)
	if err != nil {
		return err
	}
	ur := compose.UpdateRequest{Version: want, Blocks: []string{bid}}
	ur.Quota, ur.Check = s.quotaOf(r)
	c, err := s.mgr.Update(s.core.InCommit(r, http.StatusOK), r.PathValue("id"), ur)
	if err != nil {
		return err
	}
	s.writeSystem(w, r, http.StatusOK, c)
	return nil
}

func (s *Service) removeResourceBlock(w http.ResponseWriter, r *http.Request) error {
	bid, want, err := s.blockActionTarget(r)
	if err != nil {
		return err
	}
	c, err := s.mgr.Update(s.core.InCommit(r, http.StatusOK), r.PathValue("id"), compose.UpdateRequest{Version: want, Remove: []string{bid}})
	if err != nil {
		return err
	}
	s.writeSystem(w, r, http.StatusOK, c)
	return nil
}

// shrinkSystem removes blocks from a composed system, all or nothing, in
// one update: {"Blocks": [ids]}. It is its own action, not Expand with
// Remove, so the audit log names what the client asked for.
func (s *Service) shrinkSystem(w http.ResponseWriter, r *http.Request) error {
	if _, err := s.systemVisible(r, r.PathValue("id")); err != nil {
		return err
	}
	var body struct{ Blocks []string }
	if err := decode(r, &body); err != nil {
		return err
	}
	if len(body.Blocks) == 0 {
		return rf.PropertyMissing("Blocks")
	}
	want, _ := ifMatch(r)
	c, err := s.mgr.Update(s.core.InCommit(r, http.StatusOK), r.PathValue("id"), compose.UpdateRequest{Version: want, Remove: body.Blocks})
	if err != nil {
		return err
	}
	s.writeSystem(w, r, http.StatusOK, c)
	return nil
}

// expandSystem adds blocks by need: {"Needs": [...], "Remove": [ids],
// "Affinity": "same-drawer"}.
func (s *Service) expandSystem(w http.ResponseWriter, r *http.Request) error {
	if _, err := s.systemVisible(r, r.PathValue("id")); err != nil {
		return err
	}
	var body struct {
		Needs    []OemNeed
		Blocks   []string
		Remove   []string
		Affinity string
	}
	if err := decode(r, &body); err != nil {
		return err
	}
	needs, err := oemNeeds(body.Needs, "Needs")
	if err != nil {
		return err
	}
	if len(needs)+len(body.Blocks)+len(body.Remove) == 0 {
		return rf.PropertyMissing("Needs")
	}
	want, _ := ifMatch(r)
	ur := compose.UpdateRequest{Version: want, Needs: needs, Blocks: body.Blocks, Affinity: schedule.Affinity(body.Affinity), Remove: body.Remove}
	ur.Quota, ur.Check = s.quotaOf(r)
	c, err := s.mgr.Update(s.core.InCommit(r, http.StatusOK), r.PathValue("id"), ur)
	if err != nil {
		return err
	}
	s.writeSystem(w, r, http.StatusOK, c)
	return nil
}
