package composition

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"rackpool/internal/compose"
	"rackpool/internal/inventory"
	"rackpool/internal/redfish/service"
	"rackpool/internal/rf"
	"rackpool/internal/schedule"
)

// reserver is what the Compose action and the reservations need of the
// composition manager (compose.Manager).
type reserver interface {
	ReserveAll(ctx context.Context, reqs []compose.Request, ttl time.Duration) ([]*inventory.Composition, error)
	Release(ctx context.Context, id string) error
	Reservations() []*inventory.Composition
	PlanAll(reqs []compose.Request) ([]*schedule.Plan, error)
	Apply(ctx context.Context, mf compose.Manifest) ([]*inventory.Composition, error)
	Stage(ctx context.Context, mf compose.Manifest) (*compose.StagedManifest, error)
}

// compositionPolicy is the composition policy as the CompositionService
// reads, changes and applies it (compose.Manager keeps it as a record).
type compositionPolicy interface {
	Policy() compose.Policy
	UpdatePolicy(ctx context.Context, change func(*compose.Policy) error) (compose.Policy, error)
	ApplyPolicy(req compose.Request) (compose.Request, error)
}

// composeRoutes are the routes of the Compose action, the composition
// policy and the pools (Routes); the reservations are in
// reservations.go.
var composeRoutes = []service.Route[*Service]{
	{Pattern: "PATCH /redfish/v1/CompositionService", Priv: service.ConfigureManager, Handler: (*Service).patchCompositionService},
	{Pattern: "GET /redfish/v1/CompositionService/FreePool", Priv: service.Login, Handler: (*Service).getFreePool},
	{Pattern: "GET /redfish/v1/CompositionService/ActivePool", Priv: service.Login, Handler: (*Service).getActivePool},
	{Pattern: "POST /redfish/v1/CompositionService/Actions/CompositionService.Compose", Priv: service.ConfigureComponents, Handler: (*Service).composeAction},
	{Pattern: "GET /redfish/v1/CompositionService/ComposeActionInfo", Priv: service.Login, Handler: (*Service).getComposeActionInfo},
}

// CompositionService v1.2: the Compose action with a Manifest, composition
// reservations, the free and active pools, and the service's composition
// policy (AllowOverprovisioning, AllowZoneAffinity, ReservationDuration).
//
// The Compose action is all or nothing across its stanzas:
//
//	Preview         places every ComposeSystem stanza against the current
//	                state (as if applied together) and changes nothing.
//	PreviewReserve  places and reserves them all (one CompositionReservation
//	                holding one reserved system per stanza) or none.
//	Apply           with ReservationId composes the reserved systems; without
//	                it reserves then composes. DecomposeSystem stanzas run
//	                after every ComposeSystem stanza has succeeded. If any
//	                compose fails, the systems already composed by this
//	                request are decomposed and nothing remains.
//
// A decompose that fails after the composes succeeded leaves that system
// Decomposing (retry its DELETE); this is the one case in which an Apply
// reports an error with part of its work done, and the error says so.

const reservationsPath = "/redfish/v1/CompositionService/CompositionReservations/"

// policyError words compose's refusal of req's @Redfish.ZoneAffinity
// annotation under the composition policy; other errors it returns as
// they are.
func policyError(err error, req compose.Request) error {
	if req.ZoneAffinity == nil {
		return err
	}
	z := *req.ZoneAffinity
	switch {
	case errors.Is(err, compose.ErrZoneAffinityOff):
		return rf.PropertyValue("@Redfish.ZoneAffinity", z, "This service has AllowZoneAffinity false; omit the annotation.")
	case errors.Is(err, compose.ErrZoneConflict):
		return rf.PropertyValue("@Redfish.ZoneAffinity", z, "The zone of host "+z+" conflicts with the requested host "+req.Host+".")
	case errors.Is(err, compose.ErrUnknownZone):
		return rf.PropertyValue("@Redfish.ZoneAffinity", z, "Use the Id of a member of /redfish/v1/CompositionService/ResourceZones.")
	}
	return err
}

// compositionServiceBody extends the service resource with v1.2.
func (s *Service) compositionServiceBody() map[string]any {
	p := s.mgr.Policy()
	return map[string]any{
		"@odata.id":               "/redfish/v1/CompositionService",
		"@odata.type":             "#CompositionService.v1_2_0.CompositionService",
		"Id":                      "CompositionService",
		"Name":                    "Composition Service",
		"Status":                  map[string]string{"State": "Enabled", "Health": "OK"},
		"ServiceEnabled":          true,
		"AllowOverprovisioning":   p.AllowOverprovisioning,
		"AllowZoneAffinity":       p.AllowZoneAffinity,
		"ReservationDuration":     service.ISODuration(p.ReservationDuration),
		"ResourceBlocks":          rf.Ref("/redfish/v1/CompositionService/ResourceBlocks"),
		"ResourceZones":           rf.Ref("/redfish/v1/CompositionService/ResourceZones"),
		"FreePool":                rf.Ref("/redfish/v1/CompositionService/FreePool"),
		"ActivePool":              rf.Ref("/redfish/v1/CompositionService/ActivePool"),
		"CompositionReservations": rf.Ref("/redfish/v1/CompositionService/CompositionReservations"),
		"Actions": map[string]any{
			"#CompositionService.Compose": map[string]string{
				"target":              "/redfish/v1/CompositionService/Actions/CompositionService.Compose",
				"@Redfish.ActionInfo": "/redfish/v1/CompositionService/ComposeActionInfo",
			},
			"Oem": map[string]any{
				"#Rackpool.Explain": map[string]string{"target": "/redfish/v1/CompositionService/Actions/Oem/Rackpool.Explain"},
			},
		},
	}
}

// parseISODuration parses the subset service.ISODuration writes (and days).
func parseISODuration(v string) (time.Duration, error) {
	bad := fmt.Errorf("want an ISO 8601 duration such as PT5M")
	if !strings.HasPrefix(v, "P") {
		return 0, bad
	}
	var total time.Duration
	rest := v[1:]
	inTime, parts := false, 0
	for rest != "" {
		if rest[0] == 'T' {
			inTime, rest = true, rest[1:]
			continue
		}
		i := 0
		for i < len(rest) && (rest[i] >= '0' && rest[i] <= '9' || rest[i] == '.') {
			i++
		}
		if i == 0 || i == len(rest) {
			return 0, bad
		}
		var n float64
		if _, err := fmt.Sscanf(rest[:i], "%g", &n); err != nil {
			return 0, bad
		}
		unit := map[string]time.Duration{"D": 24 * time.Hour, "H": time.Hour, "M": time.Minute, "S": time.Second}
		u := string(rest[i])
		if (u == "D") == inTime || unit[u] == 0 {
			return 0, bad
		}
		total += time.Duration(n * float64(unit[u]))
		rest, parts = rest[i+1:], parts+1
	}
	if parts == 0 { // "P", "PT": no component
		return 0, bad
	}
	return total, nil
}

func (s *Service) patchCompositionService(w http.ResponseWriter, r *http.Request) error {
	var body struct {
		AllowOverprovisioning *bool
		AllowZoneAffinity     *bool
		ReservationDuration   *string
		ServiceEnabled        *bool
	}
	if err := decode(r, &body); err != nil {
		return err
	}
	if body.ServiceEnabled != nil && !*body.ServiceEnabled {
		return rf.PropertyValue("ServiceEnabled", "false", "The composition service cannot be disabled.")
	}
	var ttl time.Duration
	if body.ReservationDuration != nil {
		d, err := parseISODuration(*body.ReservationDuration)
		if err != nil || d < compose.MinReservationDuration || d > compose.MaxReservationDuration {
			return rf.PropertyValue("ReservationDuration", *body.ReservationDuration, "Use an ISO 8601 duration between PT1S and P7D, such as PT5M.")
		}
		ttl = d
	}
	_, err := s.mgr.UpdatePolicy(r.Context(), func(p *compose.Policy) error {
		if body.AllowOverprovisioning != nil {
			p.AllowOverprovisioning = *body.AllowOverprovisioning
		}
		if body.AllowZoneAffinity != nil {
			p.AllowZoneAffinity = *body.AllowZoneAffinity
		}
		if ttl != 0 {
			p.ReservationDuration = ttl
		}
		return nil
	})
	if err != nil {
		return err
	}
	service.WriteJSON(w, http.StatusOK, s.compositionServiceBody())
	return nil
}

// FreePool: blocks with room for another composition and no reservation;
// ActivePool: blocks in compositions the client may see.

func (s *Service) pool(r *http.Request, active bool) []rf.ODataID {
	p := service.Principal(r)
	members := []rf.ODataID{}
	for _, b := range s.top.Blocks {
		st := s.mgr.BlockStatus(b.ID)
		if !service.BlockVisible(p, b, st) {
			continue
		}
		inUse := len(st.Compositions) > 0
		free := len(st.Compositions)+len(st.Reservations) < max(b.MaxCompositions, 1)
		if active && inUse && len(s.visibleSystems(p, st.Compositions)) > 0 || !active && free {
			members = append(members, rf.Ref(service.BlocksPath+b.ID))
		}
	}
	return members
}

func (s *Service) getFreePool(w http.ResponseWriter, r *http.Request) error {
	service.WriteJSON(w, http.StatusOK, rf.Collection("/redfish/v1/CompositionService/FreePool", "ResourceBlockCollection", "Free Pool", s.pool(r, false)))
	return nil
}

func (s *Service) getActivePool(w http.ResponseWriter, r *http.Request) error {
	service.WriteJSON(w, http.StatusOK, rf.Collection("/redfish/v1/CompositionService/ActivePool", "ResourceBlockCollection", "Active Pool", s.pool(r, true)))
	return nil
}

// Reservations: one CompositionReservation per Compose request (its
// Group); each holds one reserved system per ComposeSystem stanza.

func (s *Service) getComposeActionInfo(w http.ResponseWriter, r *http.Request) error {
	service.WriteJSON(w, http.StatusOK, map[string]any{
		"@odata.id":   "/redfish/v1/CompositionService/ComposeActionInfo",
		"@odata.type": "#ActionInfo.v1_3_0.ActionInfo",
		"Id":          "ComposeActionInfo",
		"Name":        "Compose Action Info",
		"Parameters": []any{
			map[string]any{"Name": "RequestFormat", "Required": true, "DataType": "String", "AllowableValues": []string{"Manifest"}},
			map[string]any{"Name": "RequestType", "Required": true, "DataType": "String", "AllowableValues": []string{"Preview", "PreviewReserve", "Apply"}},
			map[string]any{"Name": "Manifest", "Required": false, "DataType": "Object", "ObjectDataType": "#Manifest.v1_1_0.Manifest"},
			map[string]any{"Name": "ReservationId", "Required": false, "DataType": "String"},
		},
	})
	return nil
}

// The action.

type stanza struct {
	StanzaType    string
	StanzaId      string
	OEMStanzaType string
	Request       json.RawMessage
	Response      json.RawMessage
}

type manifest struct {
	Description string
	Timestamp   string
	Expand      string
	Stanzas     []stanza
}

type composeActionBody struct {
	RequestFormat *string
	RequestType   *string
	Manifest      *manifest
	ReservationId *string
}

// plannedStanza is a ComposeSystem stanza turned into a request.
type plannedStanza struct {
	st   stanza
	body composeRequest
	req  compose.Request
}

func (s *Service) composeAction(w http.ResponseWriter, r *http.Request) error {
	var body composeActionBody
	if err := decode(r, &body); err != nil {
		return err
	}
	if body.RequestFormat == nil {
		return errActionParamMissing("RequestFormat")
	}
	if *body.RequestFormat != "Manifest" {
		return errActionParamValue("RequestFormat", *body.RequestFormat)
	}
	if body.RequestType == nil {
		return errActionParamMissing("RequestType")
	}
	typ := *body.RequestType
	if typ != "Preview" && typ != "PreviewReserve" && typ != "Apply" {
		return errActionParamValue("RequestType", typ)
	}
	if body.ReservationId != nil {
		if typ != "Apply" {
			return rf.PropertyValue("ReservationId", *body.ReservationId, "A ReservationId goes with RequestType Apply.")
		}
		return s.applyReservation(w, r, *body.ReservationId, body.Manifest)
	}
	if body.Manifest == nil {
		return errActionParamMissing("Manifest")
	}
	composes, decomposes, err := s.readManifest(r, body.Manifest)
	if err != nil {
		return err
	}
	switch typ {
	case "Preview":
		if len(decomposes) > 0 && len(composes) == 0 {
			return s.respondManifest(w, typ, body.Manifest, nil, nil, "")
		}
		plans, err := s.previewAll(composes)
		if err != nil {
			return err
		}
		return s.respondManifest(w, typ, body.Manifest, plans, nil, "")
	case "PreviewReserve":
		if len(decomposes) > 0 {
			return rf.PropertyValue("Manifest.Stanzas", "DecomposeSystem", "Only ComposeSystem stanzas can be reserved.")
		}
		group, rs, err := s.reserveAll(r.Context(), composes)
		if err != nil {
			return err
		}
		return s.respondManifest(w, typ, body.Manifest, nil, rs, group)
	}
	// One walk, as POST /redfish/v1/Systems: Stage places every stanza
	// once and holds the blocks, whose modelled fabric time decides
	// between answering at once and answering 202; Realize applies them.
	var mf compose.Manifest
	ids := make([]string, 0, len(composes)+len(decomposes))
	for _, c := range composes {
		mf.Stanzas = append(mf.Stanzas, compose.Stanza{Compose: &c.req})
		ids = append(ids, c.st.StanzaId)
	}
	for _, d := range decomposes {
		mf.Stanzas = append(mf.Stanzas, compose.Stanza{Decompose: d})
		ids = append(ids, d)
	}
	sm, err := s.mgr.Stage(r.Context(), mf)
	if err != nil {
		// Refused as Apply refuses it: in the task when one is asked for.
		err = s.namedStanzaError(err, ids)
		return s.core.Async(w, r, 0, func(http.ResponseWriter, *http.Request) error { return err })
	}
	return s.core.Async(w, r, sm.EstimateFabricTime(), func(w http.ResponseWriter, r *http.Request) error {
		done, err := sm.Realize(s.core.InCommit(r, http.StatusOK))
		if err != nil {
			return s.namedStanzaError(err, ids)
		}
		return s.respondManifest(w, typ, body.Manifest, nil, done, "")
	})
}

// applyManifest applies mf through the composition manager, all stanzas
// or none, naming the failing stanza by ids[i].
func (s *Service) applyManifest(r *http.Request, mf compose.Manifest, ids []string) ([]*inventory.Composition, error) {
	done, err := s.mgr.Apply(s.core.InCommit(r, http.StatusOK), mf)
	if err != nil {
		return nil, s.namedStanzaError(err, ids)
	}
	return done, nil
}

// namedStanzaError names the stanza a *compose.StanzaError failed at by
// ids[i]; other errors it returns as they are.
func (s *Service) namedStanzaError(err error, ids []string) error {
	var se *compose.StanzaError
	if errors.As(err, &se) && se.Index < len(ids) {
		return s.stanzaError(se.Err, ids[se.Index])
	}
	return err
}

func errActionParamMissing(name string) *rf.Problem {
	return rf.New(http.StatusBadRequest, rf.Registry+"ActionParameterMissing",
		fmt.Sprintf("The action CompositionService.Compose requires the parameter %s to be present in the request body.", name),
		"CompositionService.Compose", name)
}

func errActionParamValue(name, value string) *rf.Problem {
	return rf.New(http.StatusBadRequest, rf.Registry+"ActionParameterValueNotInList",
		fmt.Sprintf("The value '%s' for the parameter %s in the action CompositionService.Compose is not in the list of acceptable values.", value, name),
		value, name, "CompositionService.Compose")
}

// readManifest validates every stanza before anything happens.
func (s *Service) readManifest(r *http.Request, m *manifest) ([]plannedStanza, []string, error) {
	if len(m.Stanzas) == 0 {
		return nil, nil, rf.PropertyMissing("Manifest.Stanzas")
	}
	if len(m.Stanzas) > 64 {
		return nil, nil, rf.PropertyValue("Manifest.Stanzas", fmt.Sprint(len(m.Stanzas)), "Send at most 64 stanzas.")
	}
	var composes []plannedStanza
	var decomposes []string
	seen := map[string]bool{}
	for i, st := range m.Stanzas {
		prop := fmt.Sprintf("Manifest.Stanzas[%d]", i)
		if seen[st.StanzaId] && st.StanzaId != "" {
			return nil, nil, rf.PropertyValue(prop+".StanzaId", st.StanzaId, "Stanza IDs must be unique.")
		}
		seen[st.StanzaId] = true
		if len(st.Request) == 0 {
			return nil, nil, rf.PropertyMissing(prop + ".Request")
		}
		sub := r.Clone(r.Context())
		sub.Body = readCloser(st.Request)
		switch st.StanzaType {
		case "ComposeSystem":
			body, req, err := s.readCompose(sub)
			if err == nil {
				// Every stanza is checked before anything happens;
				// compose applies the policy when it places them.
				_, err = s.mgr.ApplyPolicy(req)
				err = policyError(err, req)
			}
			if err != nil {
				return nil, nil, s.prefixProperty(err, prop+".Request.")
			}
			name := body.Name
			if name == "" {
				name = st.StanzaId
			}
			req.Name, req.Description, req.Tenant = name, body.Description, service.Principal(r).Tenant
			req.Quota, req.Check = s.quotaOf(r)
			composes = append(composes, plannedStanza{st: st, body: body, req: req})
		case "DecomposeSystem":
			var ref struct {
				ID    string `json:"@odata.id"`
				Links *struct {
					ComputerSystems []rf.ODataID
				}
			}
			if err := json.Unmarshal(st.Request, &ref); err != nil {
				return nil, nil, rf.Malformed(prop + ".Request: " + err.Error())
			}
			ids := []string{ref.ID}
			if ref.Links != nil {
				ids = nil
				for _, l := range ref.Links.ComputerSystems {
					ids = append(ids, l.ID)
				}
			}
			for _, id := range ids {
				sys, ok := strings.CutPrefix(id, "/redfish/v1/Systems/")
				if !ok || sys == "" {
					return nil, nil, rf.PropertyValue(prop+".Request.@odata.id", id, "Name the system to decompose as /redfish/v1/Systems/{Id}.")
				}
				if _, err := s.systemVisible(r, sys); err != nil {
					return nil, nil, err
				}
				decomposes = append(decomposes, sys)
			}
		default:
			return nil, nil, rf.PropertyValue(prop+".StanzaType", st.StanzaType, "Use ComposeSystem or DecomposeSystem.")
		}
	}
	return composes, decomposes, nil
}

// previewAll places the stanzas one after another on a scratch copy of
// the state, so the preview shows what applying them together would do.
func (s *Service) previewAll(composes []plannedStanza) ([]*schedule.Plan, error) {
	reqs := make([]compose.Request, len(composes))
	for i, c := range composes {
		reqs[i] = c.req
	}
	return s.mgr.PlanAll(reqs)
}

// reserveAll reserves every stanza or none, in one store plan.
func (s *Service) reserveAll(ctx context.Context, composes []plannedStanza) (string, []*inventory.Composition, error) {
	group := "r" + service.RandomHex(6)
	reqs := make([]compose.Request, len(composes))
	for i, c := range composes {
		reqs[i] = c.req
		reqs[i].Group = group
	}
	rs, err := s.mgr.ReserveAll(ctx, reqs, 0) // for the policy's ReservationDuration
	var se *compose.StanzaError
	if errors.As(err, &se) {
		return "", nil, s.stanzaError(se.Err, composes[se.Index].st.StanzaId)
	}
	if err != nil {
		return "", nil, err
	}
	return group, rs, nil
}

func (s *Service) applyReservation(w http.ResponseWriter, r *http.Request, id string, m *manifest) error {
	rs, ok := s.reservationGroups(r)[id]
	if !ok {
		return s.missingReservation(r, id)
	}
	var blocks []string
	for _, c := range rs {
		blocks = append(blocks, c.Blocks...)
	}
	return s.core.Async(w, r, s.mgr.EstimateFabricTime(blocks), func(w http.ResponseWriter, r *http.Request) error {
		var mf compose.Manifest
		var ids []string
		for _, c := range rs {
			mf.Stanzas = append(mf.Stanzas, compose.Stanza{Reserved: c.ID})
			ids = append(ids, c.Name)
		}
		done, err := s.applyManifest(r, mf, ids)
		if err != nil {
			return err
		}
		if m == nil {
			m = &manifest{Expand: "None"}
			for _, c := range rs {
				m.Stanzas = append(m.Stanzas, stanza{StanzaType: "ComposeSystem", StanzaId: c.Name})
			}
		}
		return s.respondManifest(w, "Apply", m, nil, done, id)
	})
}

// respondManifest answers the action: the manifest with each ComposeSystem
// stanza's Response filled in (the planned, reserved or composed system).
func (s *Service) respondManifest(w http.ResponseWriter, typ string, m *manifest, plans []*schedule.Plan,
	systems []*inventory.Composition, reservation string) error {
	out := map[string]any{"RequestFormat": "Manifest", "RequestType": typ}
	var stanzas []any
	k := 0
	for _, st := range m.Stanzas {
		entry := map[string]any{"StanzaType": st.StanzaType, "StanzaId": st.StanzaId}
		if len(st.Request) > 0 {
			entry["Request"] = st.Request
		}
		if st.StanzaType == "ComposeSystem" {
			switch {
			case plans != nil && k < len(plans):
				entry["Response"] = planBody(plans[k])
			case systems != nil && k < len(systems):
				c := systems[k]
				if c.State == inventory.Reserved {
					entry["Response"] = map[string]any{"Name": c.Name, "Links": map[string]any{"ResourceBlocks": blockRefs(c.Blocks)}}
				} else {
					entry["Response"] = s.systemBody(c)
				}
			}
			k++
		}
		stanzas = append(stanzas, entry)
	}
	out["Manifest"] = map[string]any{"Description": m.Description, "Expand": orDefault(m.Expand, "None"), "Stanzas": stanzas,
		"Timestamp": time.Now().UTC().Format(time.RFC3339)}
	if reservation != "" {
		out["ReservationId"] = reservation
	}
	service.WriteJSON(w, http.StatusOK, out)
	return nil
}

func planBody(p *schedule.Plan) map[string]any {
	var ids []string
	for _, a := range p.Assignments {
		ids = append(ids, a.Block.ID)
	}
	return map[string]any{"Links": map[string]any{"ResourceBlocks": blockRefs(ids)},
		"Oem": map[string]any{"Rackpool": map[string]any{"Host": p.Host.ID, "TotalRoundTripNs": p.TotalRTTNS, "TotalHops": p.TotalHops}}}
}

func blockRefs(ids []string) []rf.ODataID {
	out := []rf.ODataID{}
	for _, id := range ids {
		out = append(out, rf.Ref(service.BlocksPath+id))
	}
	return out
}

func orDefault(v, d string) string {
	if v == "" {
		return d
	}
	return v
}

// stanzaError names the stanza in a placement error.
func (s *Service) stanzaError(err error, stanzaID string) error {
	p := s.core.Problem(err)
	if p.Resolution == "" {
		p.Resolution = "Stanza " + stanzaID + " failed; nothing was applied."
	} else {
		p.Resolution = "Stanza " + stanzaID + ": " + p.Resolution + " Nothing was applied."
	}
	return p
}

// prefixProperty qualifies a property error with the stanza's path.
func (s *Service) prefixProperty(err error, prefix string) error {
	p := s.core.Problem(err)
	if len(p.Args) > 0 && strings.Contains(p.ID, "Property") {
		a := p.Args[0]
		p.Args[0] = prefix + a
		p.Text = strings.Replace(p.Text, a, prefix+a, 1)
	}
	for i, ptr := range p.Related {
		p.Related[i] = rf.Pointer(prefix + strings.TrimPrefix(ptr, "#/"))
	}
	return p
}
