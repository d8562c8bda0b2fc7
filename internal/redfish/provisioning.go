package redfish

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"rackpool/internal/provision"
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

// provisioningRoutes are the routes of predictive provisioning (routes.go).
var provisioningRoutes = []route{
	{"GET /redfish/v1/Oem/Rackpool/Provisioning", login, (*Server).getProvisioning},
	{"POST /redfish/v1/Oem/Rackpool/Provisioning", configureComponents, (*Server).postProvisioning},
	{"GET /redfish/v1/Oem/Rackpool/Provisioning/{id}", login, (*Server).getProvisioningSubscription},
	{"PATCH /redfish/v1/Oem/Rackpool/Provisioning/{id}", configureComponents, (*Server).patchProvisioningSubscription},
	{"DELETE /redfish/v1/Oem/Rackpool/Provisioning/{id}", configureComponents, (*Server).deleteProvisioningSubscription},
}

// Predictive provisioning (OEM; P0 §8, docs/provisioning.md). The
// collection is the loop's settings and one member per composed system
// opted in; a member's ID is its system's. POST opts a system in
// ({"System": ID or its @odata.id, "Mode": "DryRun"|"On", "MinBytes",
// "MaxBytes"}), PATCH changes Mode and bounds, DELETE opts it out (the
// system keeps what it holds). A tenant sees and changes only its own
// systems' subscriptions; another tenant's answers 404.

const provisioningPath = "/redfish/v1/Oem/Rackpool/Provisioning"

var errNoProvisioning = newError(http.StatusNotFound, baseRegistry+"ResourceMissingAtURI",
	"Predictive provisioning is not enabled on this service (serve --provisioning dry-run|on).")

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
		"Links":       map[string]any{"System": ref("/redfish/v1/Systems/" + st.System)},
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

func (s *Server) getProvisioning(w http.ResponseWriter, r *http.Request) error {
	if s.prov == nil {
		return errNoProvisioning
	}
	p := principal(r)
	members := []odataID{}
	for _, st := range s.prov.List() {
		if p.Tenant == "" || st.Tenant == p.Tenant {
			members = append(members, ref(provisioningPath+"/"+st.System))
		}
	}
	rules := s.prov.Rules()
	body := collection(provisioningPath, "RackpoolProvisioningCollection", "Predictive provisioning", members)
	body["Mode"] = wireMode[s.prov.Mode()]
	body["IntervalSeconds"] = s.prov.Interval().Seconds()
	body["Rules"] = map[string]any{
		"ObservationWindowSteps": rules.Window, "PredictionWindowSteps": rules.Horizon, "LeadSteps": rules.Lead,
		"Hysteresis": rules.Hysteresis, "MinHoldSteps": rules.MinHold, "Headroom": rules.Headroom,
		"Model": string(rules.Forecast.Method), "MaxLag": rules.Forecast.MaxLag, "Quantile": rules.Forecast.Quantile,
		"LogGrowth": rules.Forecast.Growth,
	}
	writeJSON(w, http.StatusOK, body)
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
			return errPropertyValue("Mode", *b.Mode, "Mode is DryRun or On; DELETE the subscription to stop.")
		}
		sub.Mode = m
	}
	if b.MinBytes != nil {
		if *b.MinBytes < 0 {
			return errPropertyValue("MinBytes", "negative", "Give a number of bytes, 0 or more.")
		}
		sub.MinBytes = *b.MinBytes
	}
	if b.MaxBytes != nil {
		if *b.MaxBytes < 0 {
			return errPropertyValue("MaxBytes", "negative", "Give a number of bytes, 0 (no bound) or more.")
		}
		sub.MaxBytes = *b.MaxBytes
	}
	if sub.MaxBytes > 0 && sub.MinBytes > sub.MaxBytes {
		return errPropertyValue("MinBytes", "above MaxBytes", "MinBytes must not exceed MaxBytes.")
	}
	return nil
}

func (s *Server) postProvisioning(w http.ResponseWriter, r *http.Request) error {
	if s.prov == nil {
		return errNoProvisioning
	}
	var in subscriptionBodyIn
	if err := decode(r, &in); err != nil {
		return err
	}
	if in.System == nil {
		return errPropertyMissing("System")
	}
	if in.Mode == nil {
		return errPropertyMissing("Mode")
	}
	id := strings.TrimPrefix(*in.System, "/redfish/v1/Systems/")
	c, err := s.systemVisible(r, id)
	if err != nil {
		return err
	}
	if _, ok := s.prov.Get(c.ID); ok {
		return newError(http.StatusConflict, baseRegistry+"ResourceAlreadyExists",
			"System "+c.ID+" is already subscribed; PATCH "+provisioningPath+"/"+c.ID+" to change it.")
	}
	sub := provision.Subscription{System: c.ID}
	if err := in.apply(&sub); err != nil {
		return err
	}
	st, err := s.prov.Subscribe(r.Context(), sub)
	if err != nil {
		return translateProvisioning(err)
	}
	w.Header().Set("Location", provisioningPath+"/"+st.System)
	writeJSON(w, http.StatusCreated, subscriptionBody(st))
	return nil
}

// visibleSubscription is the subscription of a system the principal may
// see, or a 404.
func (s *Server) visibleSubscription(r *http.Request) (provision.Status, error) {
	if s.prov == nil {
		return provision.Status{}, errNoProvisioning
	}
	id := r.PathValue("id")
	st, ok := s.prov.Get(id)
	if !ok {
		return st, errNotFound("RackpoolProvisioningSubscription", id)
	}
	if p := principal(r); p.Tenant != "" && st.Tenant != p.Tenant {
		return st, s.hide(r, "RackpoolProvisioningSubscription", id)
	}
	return st, nil
}

func (s *Server) getProvisioningSubscription(w http.ResponseWriter, r *http.Request) error {
	st, err := s.visibleSubscription(r)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, subscriptionBody(st))
	return nil
}

func (s *Server) patchProvisioningSubscription(w http.ResponseWriter, r *http.Request) error {
	st, err := s.visibleSubscription(r)
	if err != nil {
		return err
	}
	var in subscriptionBodyIn
	if err := decode(r, &in); err != nil {
		return err
	}
	if in.System != nil {
		return errPropertyValue("System", *in.System, "A subscription's system cannot change; DELETE it and POST another.")
	}
	sub := st.Subscription
	if err := in.apply(&sub); err != nil {
		return err
	}
	if st, err = s.prov.Subscribe(r.Context(), sub); err != nil {
		return translateProvisioning(err)
	}
	writeJSON(w, http.StatusOK, subscriptionBody(st))
	return nil
}

func (s *Server) deleteProvisioningSubscription(w http.ResponseWriter, r *http.Request) error {
	st, err := s.visibleSubscription(r)
	if err != nil {
		return err
	}
	if err := s.prov.Unsubscribe(r.Context(), st.System); err != nil {
		return translateProvisioning(err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func translateProvisioning(err error) error {
	switch {
	case errors.Is(err, provision.ErrNotFound):
		return errNotFound("ComputerSystem", strings.TrimPrefix(err.Error(), provision.ErrNotFound.Error()+": "))
	case errors.Is(err, provision.ErrInvalid):
		return errPropertyValue("Mode", "", strings.TrimPrefix(err.Error(), provision.ErrInvalid.Error()+": "))
	}
	return errInternal(err)
}
