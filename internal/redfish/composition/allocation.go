package composition

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"rackpool/internal/redfish/service"
	"rackpool/internal/rf"
	"rackpool/internal/schedule"
	"rackpool/internal/tenancy"

	"rackpool/internal/compose"
)

// allocationRoutes are the routes of allocation export and import.
var allocationRoutes = []service.Route[*Service]{
	{Pattern: "POST /redfish/v1/CompositionService/Actions/Oem/Rackpool.ExportAllocation", Priv: service.ConfigureManager, Handler: (*Service).exportAction},
	{Pattern: "POST /redfish/v1/CompositionService/Actions/Oem/Rackpool.ImportAllocation", Priv: service.ConfigureManager, Handler: (*Service).importAction},
}

// Configuration export and import (P2): the current allocation, every
// composed system with its host, blocks, name, description and tenant,
// plus the tenants and their quotas, as one JSON document. Importing it
// (at start-up with `rackpool serve --import FILE`, or with the
// Rackpool.ImportAllocation action) validates the whole document first,
// then reserves every system and composes them all, or nothing: the same
// all-or-nothing path as the Compose action. Accounts are not part of it,
// since they carry password hashes.

// AllocationFormat identifies the export document.
const AllocationFormat = "rackpool-allocation/1"

// Allocation is the export document.
type Allocation struct {
	Format     string             `json:"format"`
	Topology   string             `json:"topology"`
	ExportedAt time.Time          `json:"exported_at"`
	Tenants    []tenancy.Tenant   `json:"tenants"`
	Systems    []AllocationSystem `json:"systems"`
}

// AllocationSystem is one composed system of an Allocation.
type AllocationSystem struct {
	Name        string   `json:"name"`
	Description string   `json:"description,omitempty"`
	Tenant      string   `json:"tenant,omitempty"`
	Host        string   `json:"host"`
	Blocks      []string `json:"blocks"` // device blocks (the host's compute block is implied)
}

// ExportAllocation returns the current allocation.
func (s *Service) ExportAllocation() Allocation {
	a := Allocation{Format: AllocationFormat, Topology: s.top.Name, ExportedAt: time.Now().UTC(), Tenants: s.tenants.Tenants(),
		Systems: []AllocationSystem{}}
	for _, c := range s.mgr.List() {
		sys := AllocationSystem{Name: c.Name, Description: c.Description, Tenant: c.Tenant, Host: c.Host, Blocks: []string{}}
		for _, b := range c.Blocks {
			if b != c.Host {
				sys.Blocks = append(sys.Blocks, b)
			}
		}
		a.Systems = append(a.Systems, sys)
	}
	return a
}

// ParseAllocation decodes an export document strictly.
func ParseAllocation(data []byte) (Allocation, error) {
	var a Allocation
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return a, fmt.Errorf("not an allocation document: %w", err)
	}
	if a.Format != AllocationFormat {
		return a, fmt.Errorf("format %q, want %q", a.Format, AllocationFormat)
	}
	return a, nil
}

// importPlan is what importing an Allocation would do: the tenants it
// creates and the systems it composes, checked to fit together.
type importPlan struct {
	newTenants []tenancy.Tenant
	stanzas    []plannedStanza
	plans      []*schedule.Plan
}

// planImport validates a against this service and places all its systems
// together, changing nothing: an import's Preview.
func (s *Service) planImport(a Allocation) (*importPlan, error) {
	p, err := s.checkImport(a)
	if err != nil {
		return nil, err
	}
	plans, err := s.previewAll(p.stanzas)
	if err != nil {
		return nil, fmt.Errorf("the allocation does not fit: %w", err)
	}
	p.plans = plans
	return p, nil
}

// checkImport validates a against this service: the tenants it creates and
// the stanzas of the systems it composes, not yet placed.
func (s *Service) checkImport(a Allocation) (*importPlan, error) {
	if a.Topology != s.top.Name {
		return nil, fmt.Errorf("the document was exported from topology %q, this service runs %q", a.Topology, s.top.Name)
	}
	known := map[string]bool{}
	for _, t := range s.tenants.Tenants() {
		known[t.ID] = true
	}
	p := &importPlan{}
	for _, t := range a.Tenants {
		if !known[t.ID] {
			if err := t.Validate(); err != nil {
				return nil, fmt.Errorf("tenant %s: %w", t.ID, err)
			}
			p.newTenants = append(p.newTenants, t)
			known[t.ID] = true
		}
	}
	for i, sys := range a.Systems {
		if s.top.Host(sys.Host) == nil {
			return nil, fmt.Errorf("systems[%d] (%s): unknown host %q", i, sys.Name, sys.Host)
		}
		for _, b := range sys.Blocks {
			if s.top.Block(b) == nil {
				return nil, fmt.Errorf("systems[%d] (%s): unknown block %q", i, sys.Name, b)
			}
		}
		if sys.Tenant != "" && !known[sys.Tenant] {
			return nil, fmt.Errorf("systems[%d] (%s): tenant %q is neither in the document nor on this service", i, sys.Name, sys.Tenant)
		}
		p.stanzas = append(p.stanzas, plannedStanza{st: stanza{StanzaType: "ComposeSystem", StanzaId: sys.Name},
			req: compose.Request{Name: sys.Name, Description: sys.Description, Tenant: sys.Tenant,
				Host: sys.Host, Blocks: sys.Blocks}})
	}
	return p, nil
}

// ImportAllocation validates a and composes all its systems, or nothing.
// Tenants it names that do not exist are created with its quotas.
func (s *Service) ImportAllocation(ctx context.Context, a Allocation) ([]string, error) {
	p, err := s.checkImport(a)
	if err != nil {
		return nil, err
	}
	var mf compose.Manifest
	for _, st := range p.stanzas {
		mf.Stanzas = append(mf.Stanzas, compose.Stanza{Compose: &st.req})
	}
	// Everything must fit together before anything changes: the systems
	// are placed once, and held while the tenants are created.
	sm, err := s.mgr.Stage(ctx, mf)
	var se *compose.StanzaError
	switch {
	case errors.As(err, &se) && (errors.Is(se.Err, compose.ErrPowered) || errors.Is(se.Err, compose.ErrBusy)):
		// A host not off: refused as composing the stanza refuses it.
		return nil, s.stanzaError(se.Err, p.stanzas[se.Index].st.StanzaId)
	case errors.As(err, &se):
		return nil, fmt.Errorf("the allocation does not fit: %w", se.Err)
	case err != nil:
		return nil, err
	}
	for _, t := range p.newTenants {
		if _, err := s.tenants.PutTenant(ctx, t); err != nil {
			sm.Cancel()
			return nil, fmt.Errorf("create tenant %s: %w", t.ID, err)
		}
	}
	undoTenants := func() {
		for _, t := range p.newTenants {
			_ = s.tenants.DeleteTenant(ctx, t.ID)
		}
	}
	done, err := sm.Realize(ctx)
	if err != nil {
		undoTenants()
		var se *compose.StanzaError
		if errors.As(err, &se) {
			return nil, s.stanzaError(se.Err, p.stanzas[se.Index].st.StanzaId)
		}
		return nil, err
	}
	ids := make([]string, len(done))
	for i, c := range done {
		ids[i] = c.ID
	}
	return ids, nil
}

// importPreview is the answer to an ImportAllocation with RequestType
// Preview: what an Apply would create, where each system would be placed,
// and the systems already composed that the document does not name (an
// import leaves them as they are).
func (s *Service) importPreview(r *http.Request, p *importPlan) map[string]any {
	named := map[string]bool{}
	systems := []map[string]any{}
	for i, st := range p.stanzas {
		named[st.req.Name] = true
		sys := map[string]any{"Name": st.req.Name, "Host": st.req.Host, "Blocks": service.NonNil(st.req.Blocks), "Action": "Compose"}
		if st.req.Tenant != "" {
			sys["Tenant"] = st.req.Tenant
		}
		if i < len(p.plans) && p.plans[i] != nil {
			sys["Placement"] = planBody(p.plans[i])
		}
		systems = append(systems, sys)
	}
	tenants := []string{}
	for _, t := range p.newTenants {
		tenants = append(tenants, t.ID)
	}
	kept := []map[string]any{}
	for _, c := range s.mgr.List() {
		if !service.Principal(r).Sees(c.Tenant) || named[c.Name] {
			continue
		}
		kept = append(kept, map[string]any{"Id": c.ID, "Name": c.Name, "Host": c.Host})
	}
	return map[string]any{"RequestType": "Preview", "Systems": systems, "NewTenants": tenants, "Unchanged": kept}
}

func (s *Service) exportAction(w http.ResponseWriter, r *http.Request) error {
	if r.ContentLength > 0 {
		var empty struct{}
		if err := decode(r, &empty); err != nil {
			return err
		}
	}
	a := s.ExportAllocation()
	service.NoteDetail(r, fmt.Sprintf("exported %d systems", len(a.Systems)))
	service.WriteJSON(w, http.StatusOK, a)
	return nil
}

// importRequest is the ImportAllocation action's body: the export
// document, and optionally RequestType Preview (validate and place, change
// nothing) or Apply (the default).
type importRequest struct {
	Allocation
	RequestType string `json:"RequestType,omitempty"`
}

func (s *Service) importAction(w http.ResponseWriter, r *http.Request) error {
	var req importRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	a := req.Allocation
	if a.Format != AllocationFormat {
		return rf.PropertyValue("format", a.Format, "Send a document made by Rackpool.ExportAllocation ("+AllocationFormat+").")
	}
	switch req.RequestType {
	case "", "Apply":
	case "Preview":
		p, err := s.planImport(a)
		if err != nil {
			return rf.New(http.StatusBadRequest, rf.Registry+"GeneralError", err.Error()).
				Resolve("Nothing would be imported. Correct the document or free the resources, then preview again.")
		}
		service.NoteDetail(r, fmt.Sprintf("previewed an import of %d systems", len(a.Systems)))
		service.WriteJSON(w, http.StatusOK, s.importPreview(r, p))
		return nil
	default:
		return rf.PropertyValue("RequestType", req.RequestType, "Use Preview or Apply.")
	}
	var blocks []string
	for _, sys := range a.Systems {
		blocks = append(blocks, sys.Blocks...)
	}
	return s.core.Async(w, r, s.mgr.EstimateFabricTime(blocks), func(w http.ResponseWriter, r *http.Request) error {
		ids, err := s.ImportAllocation(r.Context(), a)
		if err != nil {
			switch err.(type) {
			case *rf.Problem: // a stanza's refusal, worded
				return err
			}
			return rf.New(http.StatusBadRequest, rf.Registry+"GeneralError", err.Error()).
				Resolve("Nothing was imported. Correct the document or free the resources, then retry.")
		}
		service.NoteDetail(r, fmt.Sprintf("imported %d systems", len(ids)))
		var refs []rf.ODataID
		for _, id := range ids {
			refs = append(refs, rf.Ref("/redfish/v1/Systems/"+id))
		}
		service.WriteJSON(w, http.StatusOK, map[string]any{"Systems": service.NonNil(refs)})
		return nil
	})
}
