package oem

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"rackpool/internal/provision"
	"rackpool/internal/redfish/service"
	"rackpool/internal/rf"
)

// Provisioner is the provisioning loop the provisioning routes serve
// (provision.Loop).
type Provisioner interface {
	Mode() provision.Mode
	Rules() provision.Rules
	Interval() time.Duration
	Subscribe(ctx context.Context, s provision.Subscription) (provision.Status, error)
	Unsubscribe(ctx context.Context, system string) error
	Get(system string) (provision.Status, bool)
	List() []provision.Status
}

// Provisioning serves predictive provisioning's subscriptions.
type Provisioning struct {
	loop    Provisioner // nil: no provisioning
	systems service.Systems
	core    service.Hider
}

// NewProvisioning returns the provisioning routes' service over loop
// (nil: none, every route answers 404); systems and core decide which
// systems a principal may subscribe.
func NewProvisioning(loop Provisioner, systems service.Systems, core service.Hider) *Provisioning {
	return &Provisioning{loop: loop, systems: systems, core: core}
}

// ProvisioningRoutes are the routes of predictive provisioning (the core's
// routes.go gathers them).
var ProvisioningRoutes = []service.Route[*Provisioning]{
	{Pattern: "GET /redfish/v1/Oem/Rackpool/Provisioning", Priv: service.Login, Handler: (*Provisioning).getProvisioning},
	{Pattern: "POST /redfish/v1/Oem/Rackpool/Provisioning", Priv: service.ConfigureComponents, Handler: (*Provisioning).postProvisioning},
	{Pattern: "GET /redfish/v1/Oem/Rackpool/Provisioning/{id}", Priv: service.Login, Handler: (*Provisioning).getProvisioningSubscription},
	{Pattern: "PATCH /redfish/v1/Oem/Rackpool/Provisioning/{id}", Priv: service.ConfigureComponents, Handler: (*Provisioning).patchProvisioningSubscription},
	{Pattern: "DELETE /redfish/v1/Oem/Rackpool/Provisioning/{id}", Priv: service.ConfigureComponents, Handler: (*Provisioning).deleteProvisioningSubscription},
}

// Predictive provisioning (OEM; P0 §8, docs/provisioning.md). The
// collection is the loop's settings and one member per composed system
// opted in; a member's ID is its system's. POST opts a system in
// ({"System": ID or its @odata.id, "Mode": "DryRun"|"On", "MinBytes",
// "MaxBytes"}), PATCH changes Mode and bounds, DELETE opts it out (the
// system keeps what it holds). A tenant sees and changes only its own
// systems' subscriptions; another tenant's answers 404.

const provisioningPath = "/redfish/v1/Oem/Rackpool/Provisioning"

func errNoProvisioning() *rf.Problem {
	return rf.New(http.StatusNotFound, rf.Registry+"ResourceMissingAtURI",
		"Predictive provisioning is not enabled on this service (serve --provisioning dry-run|on).")
}

// wireMode and modeWire translate the loop's modes to Redfish-style
// enumeration values.
var wireMode = map[provision.Mode]string{provision.ModeOff: "Off", provision.ModeDryRun: "DryRun", provision.ModeOn: "On"}

func modeWire(s string) (provision.Mode, bool) {
	for m, w := range wireMode {
		if w == s {
			return m, true
		}
	}
	return "", false
}

func subscriptionBody(st provision.Status) map[string]any {
	b := map[string]any{
		"@odata.id":   provisioningPath + "/" + st.System,
		"@odata.type": "#RackpoolProvisioningSubscription.v1_0_0.RackpoolProvisioningSubscription",
		"Id":          st.System,
		"Name":        "Provisioning of system " + st.System,
		"Mode":        wireMode[st.Mode],
		"Effective":   wireMode[st.Effective],
		"MinBytes":    st.MinBytes,
		"MaxBytes":    st.MaxBytes,
		"PooledBytes": st.PooledBytes,
		"LocalBytes":  st.LocalBytes,
		"Created":     st.Created.UTC().Format(time.RFC3339),
		"HeldSince":   st.HeldFrom.UTC().Format(time.RFC3339),
		"Links":       map[string]any{"System": rf.Ref("/redfish/v1/Systems/" + st.System)},
	}
	if st.Error != "" {
		b["Error"] = st.Error
	}
	if d := st.Last; d != nil {
		b["LastDecision"] = map[string]any{
			"Time": d.Time.Format(time.RFC3339), "Action": string(d.Action), "Applied": d.Applied,
			"FromBlocks": d.From, "ToBlocks": d.To, "TargetBlocks": d.Target, "LastUseBlocks": d.LastUse,
			"Observed": d.Observed, "ObservedMinBlocks": d.ObservedMin, "ObservedMaxBlocks": d.ObservedMax,
			"Model": d.Model, "Fallback": d.Fallback, "ForecastPeakBlocks": d.ForecastPeak,
			"ForecastUpperBlocks": d.ForecastUpper, "Warmup": d.Warmup, "Blocks": d.Blocks,
			"Reason": d.Reason, "Explanation": d.Explanation,
		}
	}
	return b
}

func (s *Provisioning) getProvisioning(w http.ResponseWriter, r *http.Request) error {
	if s.loop == nil {
		return errNoProvisioning()
	}
	p := service.Principal(r)
	members := []rf.ODataID{}
	for _, st := range s.loop.List() {
		if p.Tenant == "" || st.Tenant == p.Tenant {
			members = append(members, rf.Ref(provisioningPath+"/"+st.System))
		}
	}
	rules := s.loop.Rules()
	body := rf.Collection(provisioningPath, "RackpoolProvisioningCollection", "Predictive provisioning", members)
	body["Mode"] = wireMode[s.loop.Mode()]
	body["IntervalSeconds"] = s.loop.Interval().Seconds()
	body["Rules"] = map[string]any{
		"ObservationWindowSteps": rules.Window, "PredictionWindowSteps": rules.Horizon, "LeadSteps": rules.Lead,
		"Hysteresis": rules.Hysteresis, "MinHoldSteps": rules.MinHold, "Headroom": rules.Headroom,
		"Model": string(rules.Forecast.Method), "MaxLag": rules.Forecast.MaxLag, "Quantile": rules.Forecast.Quantile,
		"LogGrowth": rules.Forecast.Growth,
	}
	service.WriteJSON(w, http.StatusOK, body)
	return nil
}

// subscriptionBodyIn is what POST and PATCH take.
type subscriptionBodyIn struct {
	System   *string
	Mode     *string
	MinBytes *int64
	MaxBytes *int64
}

func (b subscriptionBodyIn) apply(sub *provision.Subscription) error {
	if b.Mode != nil {
		m, ok := modeWire(*b.Mode)
		if !ok || m == provision.ModeOff {
			return rf.PropertyValue("Mode", *b.Mode, "Mode is DryRun or On; DELETE the subscription to stop.")
		}
		sub.Mode = m
	}
	if b.MinBytes != nil {
		if *b.MinBytes < 0 {
			return rf.PropertyValue("MinBytes", "negative", "Give a number of bytes, 0 or more.")
		}
		sub.MinBytes = *b.MinBytes
	}
	if b.MaxBytes != nil {
		if *b.MaxBytes < 0 {
			return rf.PropertyValue("MaxBytes", "negative", "Give a number of bytes, 0 (no bound) or more.")
		}
		sub.MaxBytes = *b.MaxBytes
	}
	if sub.MaxBytes > 0 && sub.MinBytes > sub.MaxBytes {
		return rf.PropertyValue("MinBytes", "above MaxBytes", "MinBytes must not exceed MaxBytes.")
	}
	return nil
}

func (s *Provisioning) postProvisioning(w http.ResponseWriter, r *http.Request) error {
	if s.loop == nil {
		return errNoProvisioning()
	}
	var in subscriptionBodyIn
	if err := rf.Decode(r, &in, rf.MaxBody); err != nil {
		return err
	}
	if in.System == nil {
		return rf.PropertyMissing("System")
	}
	if in.Mode == nil {
		return rf.PropertyMissing("Mode")
	}
	id := strings.TrimPrefix(*in.System, "/redfish/v1/Systems/")
	c, err := service.VisibleSystem(r, s.systems, s.core, id)
	if err != nil {
		return err
	}
	if _, ok := s.loop.Get(c.ID); ok {
		return rf.New(http.StatusConflict, rf.Registry+"ResourceAlreadyExists",
			"System "+c.ID+" is already subscribed; PATCH "+provisioningPath+"/"+c.ID+" to change it.")
	}
	sub := provision.Subscription{System: c.ID}
	if err := in.apply(&sub); err != nil {
		return err
	}
	st, err := s.loop.Subscribe(r.Context(), sub)
	if err != nil {
		return translateProvisioning(err)
	}
	w.Header().Set("Location", provisioningPath+"/"+st.System)
	service.WriteJSON(w, http.StatusCreated, subscriptionBody(st))
	return nil
}

// visibleSubscription is the subscription of a system the principal may
// see, or a 404.
func (s *Provisioning) visibleSubscription(r *http.Request) (provision.Status, error) {
	if s.loop == nil {
		return provision.Status{}, errNoProvisioning()
	}
	id := r.PathValue("id")
	st, ok := s.loop.Get(id)
	if !ok {
		return st, rf.NotFound("RackpoolProvisioningSubscription", id)
	}
	if p := service.Principal(r); p.Tenant != "" && st.Tenant != p.Tenant {
		return st, s.core.Hide(r, "RackpoolProvisioningSubscription", id)
	}
	return st, nil
}

func (s *Provisioning) getProvisioningSubscription(w http.ResponseWriter, r *http.Request) error {
	st, err := s.visibleSubscription(r)
	if err != nil {
		return err
	}
	service.WriteJSON(w, http.StatusOK, subscriptionBody(st))
	return nil
}

func (s *Provisioning) patchProvisioningSubscription(w http.ResponseWriter, r *http.Request) error {
	st, err := s.visibleSubscription(r)
	if err != nil {
		return err
	}
	var in subscriptionBodyIn
	if err := rf.Decode(r, &in, rf.MaxBody); err != nil {
		return err
	}
	if in.System != nil {
		return rf.PropertyValue("System", *in.System, "A subscription's system cannot change; DELETE it and POST another.")
	}
	sub := st.Subscription
	if err := in.apply(&sub); err != nil {
		return err
	}
	if st, err = s.loop.Subscribe(r.Context(), sub); err != nil {
		return translateProvisioning(err)
	}
	service.WriteJSON(w, http.StatusOK, subscriptionBody(st))
	return nil
}

func (s *Provisioning) deleteProvisioningSubscription(w http.ResponseWriter, r *http.Request) error {
	st, err := s.visibleSubscription(r)
	if err != nil {
		return err
	}
	if err := s.loop.Unsubscribe(r.Context(), st.System); err != nil {
		return translateProvisioning(err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func translateProvisioning(err error) error {
	switch {
	case errors.Is(err, provision.ErrNotFound):
		return rf.NotFound("ComputerSystem", strings.TrimPrefix(err.Error(), provision.ErrNotFound.Error()+": "))
	case errors.Is(err, provision.ErrInvalid):
		return rf.PropertyValue("Mode", "", strings.TrimPrefix(err.Error(), provision.ErrInvalid.Error()+": "))
	}
	return err
}
