package composition

// Power and boot of systems: ComputerSystem.Reset, PowerState and Boot
// (compose/power.go has the rules; docs/redfish.md, "Power and boot").

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	"rackpool/internal/compose"
	"rackpool/internal/inventory"
	"rackpool/internal/odata"
	"rackpool/internal/redfish/service"
	"rackpool/internal/rf"
)

// powerController is what the Reset action and the Boot PATCH need of the
// composition manager (compose.Manager).
type powerController interface {
	Reset(ctx context.Context, id, t string, want int64) (compose.PowerState, error)
	SetBoot(ctx context.Context, id string, b inventory.Boot, want int64) (compose.PowerState, error)
	Power(ctx context.Context, id string) (compose.PowerState, error)
	EstimateReset(ctx context.Context, id, t string) time.Duration
}

// powerRoutes are the routes of power and boot (Routes); Boot is set
// with PATCH /redfish/v1/Systems/{id} (systems.go).
var powerRoutes = []service.Route[*Service]{
	{Pattern: "POST /redfish/v1/Systems/{id}/Actions/ComputerSystem.Reset", Priv: service.ConfigureComponents, Handler: (*Service).resetSystem},
	{Pattern: "GET /redfish/v1/Systems/{id}/BootOptions", Priv: service.Login, Handler: (*Service).getBootOptions},
	{Pattern: "GET /redfish/v1/Systems/{id}/BootOptions/{ref}", Priv: service.Login, Handler: (*Service).getBootOption},
}

const resetAction = "#ComputerSystem.Reset"

// powerOf returns system id's power, with a bounded wait for a BMC.
func (s *Service) powerOf(ctx context.Context, id string) (compose.PowerState, bool) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	ps, err := s.mgr.Power(ctx, id)
	if err != nil {
		s.log.Warn("power state", "system", id, "err", err)
		return ps, false
	}
	return ps, true
}

// addPower adds PowerState, Boot and the Reset action to a system's body
// (a composed system's; a host's is written by appendHost with the same
// writers).
func addPower(body map[string]any, id string, ps compose.PowerState) {
	body["PowerState"] = powerState(ps)
	body["Boot"] = json.RawMessage(appendBoot(nil, id, ps))
	actions, _ := body["Actions"].(map[string]any)
	if actions == nil {
		actions = map[string]any{}
		body["Actions"] = actions
	}
	actions[resetAction] = json.RawMessage(appendReset(nil, id, ps))
}

// powerState is the PowerState a system in ps shows.
func powerState(ps compose.PowerState) string {
	if ps.IsOff() {
		return string(inventory.PowerOff)
	}
	return string(ps.State)
}

// appendBoot appends a system's Boot object, its keys in encoding/json's
// order. UefiTargetBootSourceOverride is present wherever UefiTarget may
// be chosen (null until set), as clients look for the property to know
// they may set it; BootNext likewise wherever UefiBootNext may be.
func appendBoot(w []byte, id string, ps compose.PowerState) []byte {
	b := ps.Boot
	w = append(w, '{')
	switch {
	case b.BootNext != "":
		w = append(w, `"BootNext":`...)
		w = odata.AppendString(w, b.BootNext)
		w = append(w, ',')
	case slices.Contains(ps.Caps.BootTargets, "UefiBootNext"):
		w = append(w, `"BootNext":null,`...)
	}
	if ps.BootOptions != nil {
		w = append(w, `"BootOptions":{"@odata.id":`...)
		w = odata.AppendJoined(w, "/redfish/v1/Systems/", id, "/BootOptions")
		w = append(w, `},`...)
	}
	w = append(w, `"BootSourceOverrideEnabled":`...)
	w = odata.AppendString(w, orDefault(b.Enabled, "Disabled"))
	w = append(w, `,"BootSourceOverrideEnabled@Redfish.AllowableValues":`...)
	w = odata.AppendStrings(w, compose.BootEnabledValues)
	w = append(w, `,"BootSourceOverrideMode":`...)
	w = odata.AppendString(w, orDefault(b.Mode, "UEFI"))
	w = append(w, `,"BootSourceOverrideMode@Redfish.AllowableValues":`...)
	w = odata.AppendStrings(w, compose.BootModeValues)
	w = append(w, `,"BootSourceOverrideTarget":`...)
	w = odata.AppendString(w, orDefault(b.Target, "None"))
	w = append(w, `,"BootSourceOverrideTarget@Redfish.AllowableValues":`...)
	w = odata.AppendStrings(w, service.NonNil(ps.Caps.BootTargets))
	switch {
	case b.UefiTarget != "":
		w = append(w, `,"UefiTargetBootSourceOverride":`...)
		w = odata.AppendString(w, b.UefiTarget)
	case slices.Contains(ps.Caps.BootTargets, "UefiTarget"):
		w = append(w, `,"UefiTargetBootSourceOverride":null`...)
	}
	return append(w, '}')
}

// appendReset appends a system's #ComputerSystem.Reset action.
func appendReset(w []byte, id string, ps compose.PowerState) []byte {
	w = append(w, `{"ResetType@Redfish.AllowableValues":`...)
	w = odata.AppendStrings(w, service.NonNil(ps.Caps.ResetTypes))
	w = append(w, `,"target":`...)
	w = odata.AppendJoined(w, "/redfish/v1/Systems/", id, "/Actions/ComputerSystem.Reset")
	return append(w, '}')
}

// powerSystem resolves the system a power request names and checks the
// client may act on it: a composition it sees, or a host. A tenant acts on
// a host only through its own composed system.
func (s *Service) powerSystem(r *http.Request, id string) error {
	if h := s.top.Host(id); h != nil {
		p := service.Principal(r)
		if !s.visibleBlock(p, h.Block) {
			return s.core.Hide(r, "ComputerSystem", id)
		}
		if p.Tenant != "" {
			e := rf.InsufficientPrivilege()
			e.Resolution = "A tenant resets its composed system, not the physical host " + id + "."
			return e
		}
		return nil
	}
	_, err := s.systemVisible(r, id)
	return err
}

// versionFor is the composition version an If-Match asks for (0 for a
// host, whose ETag the If-Match guard has already checked).
func (s *Service) versionFor(r *http.Request, id string) int64 {
	if s.top.Host(id) != nil {
		return 0
	}
	want, _ := ifMatch(r)
	return want
}

func (s *Service) resetSystem(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if err := s.powerSystem(r, id); err != nil {
		return err
	}
	var body struct{ ResetType *string }
	if err := decode(r, &body); err != nil {
		return err
	}
	if body.ResetType == nil {
		return rf.New(http.StatusBadRequest, rf.Registry+"ActionParameterMissing",
			"The action ComputerSystem.Reset requires the parameter ResetType to be present in the request body.", "ComputerSystem.Reset", "ResetType").
			Resolve("Give a ResetType from the system's ResetType@Redfish.AllowableValues, e.g. {\"ResetType\": \"On\"}.")
	}
	t := *body.ResetType
	want := s.versionFor(r, id)
	// An unknown type is estimated at no time: it is refused at once, by
	// the manager, which checks it against what the host offers.
	estimate := s.mgr.EstimateReset(r.Context(), id, t)
	return s.core.Async(w, r, estimate, func(w http.ResponseWriter, r *http.Request) error {
		after, err := s.mgr.Reset(s.core.InCommit(r, http.StatusNoContent), id, t, want)
		var rt *compose.ResetTypeError
		if errors.As(err, &rt) {
			return rf.New(http.StatusBadRequest, rf.Registry+"ActionParameterValueNotInList",
				"The value '"+t+"' for the parameter ResetType in the action ComputerSystem.Reset is not in the list of acceptable values.",
				t, "ResetType", "ComputerSystem.Reset").
				Resolve("Use one of the system's ResetType@Redfish.AllowableValues: " + strings.Join(rt.Allowed, ", ") + ".")
		}
		if err != nil {
			return err
		}
		service.NoteDetail(r, "reset "+id+" "+t+": "+after.State)
		w.WriteHeader(http.StatusNoContent)
		return nil
	})
}

// bootPatch is the Boot property of a PATCH.
type bootPatch struct {
	BootSourceOverrideEnabled    *string
	BootSourceOverrideTarget     *string
	BootSourceOverrideMode       *string
	UefiTargetBootSourceOverride *string
	BootNext                     *string
}

// setBoot applies a PATCH of Boot to system id.
func (s *Service) setBoot(r *http.Request, id string, bp *bootPatch, want int64) error {
	var b inventory.Boot
	for _, f := range []struct {
		v   *string
		dst *string
	}{{bp.BootSourceOverrideEnabled, &b.Enabled}, {bp.BootSourceOverrideTarget, &b.Target},
		{bp.BootSourceOverrideMode, &b.Mode}, {bp.UefiTargetBootSourceOverride, &b.UefiTarget}, {bp.BootNext, &b.BootNext}} {
		if f.v != nil {
			*f.dst = *f.v
		}
	}
	if bp.UefiTargetBootSourceOverride != nil && b.UefiTarget == "" {
		return rf.PropertyValue("Boot/UefiTargetBootSourceOverride", "", "Give the UEFI device path to boot from.")
	}
	if bp.BootNext != nil && b.BootNext == "" {
		return rf.PropertyValue("Boot/BootNext", "", "Give the BootOptionReference of one of the system's BootOptions.")
	}
	for name, v := range map[string]*string{"Boot/BootSourceOverrideEnabled": bp.BootSourceOverrideEnabled,
		"Boot/BootSourceOverrideTarget": bp.BootSourceOverrideTarget, "Boot/BootSourceOverrideMode": bp.BootSourceOverrideMode} {
		if v != nil && *v == "" { // the manager reads "" as "keep"
			return rf.New(http.StatusBadRequest, rf.Registry+"PropertyValueNotInList",
				"The value '' for the property "+name+" is not in the list of acceptable values.", "", name).
				Resolve("Use one of the values in " + name + "@Redfish.AllowableValues.")
		}
	}
	if b == (inventory.Boot{}) {
		return rf.PropertyMissing("Boot/BootSourceOverrideTarget")
	}
	// The manager checks each value against what the host offers.
	_, err := s.mgr.SetBoot(s.core.InCommit(r, http.StatusOK), id, b, want)
	var ve *compose.ValueError
	switch {
	case errors.As(err, &ve) && ve.Allowed == nil:
		target := "UefiTarget"
		if ve.Property == "BootNext" {
			target = "UefiBootNext"
		}
		return rf.New(http.StatusBadRequest, rf.Registry+"PropertyValueConflict",
			"The property 'BootSourceOverrideTarget' could not be written because its value would conflict with the value of the '"+ve.Property+"' property.",
			"BootSourceOverrideTarget", ve.Property).Resolve("Give " + ve.Property + " with BootSourceOverrideTarget " + target + ".")
	case errors.As(err, &ve):
		name := "Boot/" + ve.Property
		return rf.New(http.StatusBadRequest, rf.Registry+"PropertyValueNotInList",
			"The value '"+ve.Value+"' for the property "+name+" is not in the list of acceptable values.", ve.Value, name).
			Resolve("Use one of " + strings.Join(ve.Allowed, ", ") + ".")
	}
	return err
}
