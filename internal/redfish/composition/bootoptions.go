package composition

import (
	"net/http"

	"rackpool/internal/compose"
	"rackpool/internal/redfish/service"
	"rackpool/internal/rf"
)

// bootOptions returns the boot options of system id if r's principal may
// see it; a system whose host a BMC manages has none of rackpool's (404).
func (s *Service) bootOptions(r *http.Request, id string) ([]compose.BootOption, error) {
	if _, err := s.parts(r, id); err != nil {
		return nil, err
	}
	ps, ok := s.powerOf(r.Context(), id)
	if !ok || ps.BootOptions == nil {
		return nil, rf.NotFound("BootOptionCollection", id+"/BootOptions")
	}
	return ps.BootOptions, nil
}

func bootOptionPath(system, ref string) string {
	return "/redfish/v1/Systems/" + system + "/BootOptions/" + ref
}

func (s *Service) getBootOptions(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	opts, err := s.bootOptions(r, id)
	if err != nil {
		return err
	}
	members := []rf.ODataID{}
	for _, o := range opts {
		members = append(members, rf.Ref(bootOptionPath(id, o.Ref)))
	}
	service.WriteJSON(w, http.StatusOK, rf.Collection("/redfish/v1/Systems/"+id+"/BootOptions", "BootOptionCollection",
		"Boot Option Collection", members))
	return nil
}

// getBootOption answers one boot option: the host's network boot, or a
// composed drive or NIC, linked to its resource as RelatedItem.
func (s *Service) getBootOption(w http.ResponseWriter, r *http.Request) error {
	id, ref := r.PathValue("id"), r.PathValue("ref")
	opts, err := s.bootOptions(r, id)
	if err != nil {
		return err
	}
	for _, o := range opts {
		if o.Ref != ref {
			continue
		}
		related := []rf.ODataID{}
		if b := s.top.Block(o.Block); b != nil {
			if service.IsDrive(b.Kind) {
				related = append(related, rf.Ref(service.DrivePath(b)))
			} else if p := nicPath(b); p != "" {
				related = append(related, rf.Ref(p))
			}
		}
		service.WriteJSON(w, http.StatusOK, map[string]any{
			"@odata.id":           bootOptionPath(id, o.Ref),
			"@odata.type":         "#BootOption.v1_0_6.BootOption",
			"Id":                  o.Ref,
			"Name":                "Boot option " + o.Ref,
			"DisplayName":         o.Name,
			"BootOptionReference": o.Ref,
			"BootOptionEnabled":   true,
			"Alias":               o.Alias,
			"RelatedItem":         related,
		})
		return nil
	}
	return rf.NotFound("BootOption", ref)
}
