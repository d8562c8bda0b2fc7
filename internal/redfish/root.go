package redfish

import (
	"errors"
	"fmt"
	"net/http"
	"rackpool/internal/tenancy"
	"strings"
)

// serviceRoutes are the routes of the service root, the OData documents and the SessionService (routes.go).
var serviceRoutes = []route{
	{"GET /redfish", public, (*Server).getVersions},
	{"GET /redfish/v1", public, (*Server).getServiceRoot},
	{"GET /redfish/v1/{$}", public, (*Server).getServiceRoot},
	{"GET /redfish/v1/$metadata", public, (*Server).getMetadata},
	{"GET /redfish/v1/odata", public, (*Server).getOData},
	{"GET /redfish/v1/SessionService", login, (*Server).getSessionService},
	{"GET /redfish/v1/SessionService/Sessions", login, (*Server).getSessions},
	{"POST /redfish/v1/SessionService/Sessions", public, (*Server).postSession},
	{"GET /redfish/v1/SessionService/Sessions/{id}", login, (*Server).getSession},
	{"DELETE /redfish/v1/SessionService/Sessions/{id}", login, (*Server).deleteSession},
}

func (s *Server) getVersions(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, map[string]string{"v1": "/redfish/v1/"})
	return nil
}

func (s *Server) getServiceRoot(w http.ResponseWriter, r *http.Request) error {
	root := map[string]any{
		"@odata.id":          "/redfish/v1",
		"@odata.type":        "#ServiceRoot.v1_17_0.ServiceRoot",
		"Id":                 "RootService",
		"Name":               "rackpool Root Service",
		"RedfishVersion":     "1.21.0",
		"UUID":               s.uuid,
		"Product":            "rackpool",
		"Vendor":             "rackpool",
		"Systems":            ref("/redfish/v1/Systems"),
		"Chassis":            ref("/redfish/v1/Chassis"),
		"Fabrics":            ref("/redfish/v1/Fabrics"),
		"CompositionService": ref("/redfish/v1/CompositionService"),
		"SessionService":     ref("/redfish/v1/SessionService"),
		"AccountService":     ref("/redfish/v1/AccountService"),
		"EventService":       ref("/redfish/v1/EventService"),
		"Tasks":              ref("/redfish/v1/TaskService"), // ServiceRoot's name for the TaskService link
		"Managers":           ref("/redfish/v1/Managers"),
		"Links":              map[string]any{"Sessions": ref("/redfish/v1/SessionService/Sessions")},
		"ProtocolFeaturesSupported": map[string]any{
			// What query.go implements.
			"ExcerptQuery": false, "OnlyMemberQuery": true, "SelectQuery": true,
			"ExpandQuery": map[string]any{"ExpandAll": true, "Levels": true, "Links": true, "NoLinks": true,
				"MaxLevels": maxExpandLevels},
			"FilterQuery": false, "TopSkipQuery": true,
		},
		"Oem": rackpoolOem("ServiceRoot", map[string]any{"Topology": ref("/redfish/v1/Oem/Rackpool/Topology")}),
	}
	if s.tel != nil {
		root["TelemetryService"] = ref(telemetryPath)
	}
	writeJSON(w, http.StatusOK, root)
	return nil
}

// metadataNamespaces lists the schemas the service uses, for $metadata.
var metadataNamespaces = []struct{ file, ns, version string }{
	{"ServiceRoot", "ServiceRoot", "v1_17_0"},
	{"ComputerSystemCollection", "ComputerSystemCollection", ""},
	{"ComputerSystem", "ComputerSystem", "v1_22_0"},
	{"ChassisCollection", "ChassisCollection", ""},
	{"Chassis", "Chassis", "v1_25_0"},
	{"CompositionService", "CompositionService", "v1_2_0"},
	{"ResourceBlockCollection", "ResourceBlockCollection", ""},
	{"ResourceBlock", "ResourceBlock", "v1_4_0"},
	{"ZoneCollection", "ZoneCollection", ""},
	{"Zone", "Zone", "v1_6_0"},
	{"FabricCollection", "FabricCollection", ""},
	{"Fabric", "Fabric", "v1_3_0"},
	{"SwitchCollection", "SwitchCollection", ""},
	{"Switch", "Switch", "v1_9_0"},
	{"PortCollection", "PortCollection", ""},
	{"Port", "Port", "v1_11_0"},
	{"EndpointCollection", "EndpointCollection", ""},
	{"Endpoint", "Endpoint", "v1_8_0"},
	{"SessionService", "SessionService", "v1_1_8"},
	{"SessionCollection", "SessionCollection", ""},
	{"Session", "Session", "v1_7_0"},
	{"CollectionCapabilities", "CollectionCapabilities", "v1_4_0"},
	{"Message", "Message", "v1_1_1"},
	{"Resource", "Resource", "v1_19_0"},
	{"AccountService", "AccountService", "v1_15_0"},
	{"ManagerAccountCollection", "ManagerAccountCollection", ""},
	{"ManagerAccount", "ManagerAccount", "v1_12_0"},
	{"RoleCollection", "RoleCollection", ""},
	{"Role", "Role", "v1_3_0"},
	{"CompositionReservationCollection", "CompositionReservationCollection", ""},
	{"CompositionReservation", "CompositionReservation", "v1_0_0"},
	{"ActionInfo", "ActionInfo", "v1_3_0"},
	{"Manifest", "Manifest", "v1_1_0"},
	{"TaskService", "TaskService", "v1_2_0"},
	{"TaskCollection", "TaskCollection", ""},
	{"Task", "Task", "v1_7_0"},
	{"EventService", "EventService", "v1_10_0"},
	{"EventDestinationCollection", "EventDestinationCollection", ""},
	{"EventDestination", "EventDestination", "v1_14_0"},
	{"Event", "Event", "v1_9_0"},
	{"ManagerCollection", "ManagerCollection", ""},
	{"Manager", "Manager", "v1_19_0"},
	{"LogServiceCollection", "LogServiceCollection", ""},
	{"LogService", "LogService", "v1_5_0"},
	{"LogEntryCollection", "LogEntryCollection", ""},
	{"LogEntry", "LogEntry", "v1_15_0"},
	{"ConnectionCollection", "ConnectionCollection", ""},
	{"PCIeDeviceCollection", "PCIeDeviceCollection", ""},
	{"PCIeDevice", "PCIeDevice", "v1_21_0"},
	{"CXLLogicalDeviceCollection", "CXLLogicalDeviceCollection", ""},
	{"CXLLogicalDevice", "CXLLogicalDevice", "v1_3_0"},
	{"MemoryDomainCollection", "MemoryDomainCollection", ""},
	{"MemoryDomain", "MemoryDomain", "v1_5_1"},
	{"MemoryChunksCollection", "MemoryChunksCollection", ""},
	{"MemoryChunks", "MemoryChunks", "v1_6_2"},
	{"Connection", "Connection", "v1_3_0"},
	{"TelemetryService", "TelemetryService", "v1_4_1"},
	{"MetricDefinitionCollection", "MetricDefinitionCollection", ""},
	{"MetricDefinition", "MetricDefinition", "v1_3_5"},
	{"MetricReportDefinitionCollection", "MetricReportDefinitionCollection", ""},
	{"MetricReportDefinition", "MetricReportDefinition", "v1_4_7"},
	{"MetricReportCollection", "MetricReportCollection", ""},
	{"MetricReport", "MetricReport", "v1_5_2"},
}

func (s *Server) getMetadata(w http.ResponseWriter, r *http.Request) error {
	var b strings.Builder
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	b.WriteString(`<edmx:Edmx xmlns:edmx="http://docs.oasis-open.org/odata/ns/edmx" Version="4.0">` + "\n")
	for _, n := range metadataNamespaces {
		fmt.Fprintf(&b, "  <edmx:Reference Uri=\"http://redfish.dmtf.org/schemas/v1/%s_v1.xml\">\n", n.file)
		fmt.Fprintf(&b, "    <edmx:Include Namespace=\"%s\"/>\n", n.ns)
		if n.version != "" {
			fmt.Fprintf(&b, "    <edmx:Include Namespace=\"%s.%s\"/>\n", n.ns, n.version)
		}
		b.WriteString("  </edmx:Reference>\n")
	}
	// The OEM schema (oem_schema.go), served by the service itself.
	fmt.Fprintf(&b, "  <edmx:Reference Uri=\"%s\">\n", rackpoolSchemaURI)
	for _, ns := range []string{"Rackpool", rackpoolOemNamespace, "RackpoolTopology", "RackpoolTopology.v1_0_0",
		"RackpoolTenantCollection", "RackpoolTenant", "RackpoolTenant.v1_0_0"} {
		fmt.Fprintf(&b, "    <edmx:Include Namespace=\"%s\"/>\n", ns)
	}
	b.WriteString("  </edmx:Reference>\n")
	b.WriteString("  <edmx:DataServices>\n    <Schema xmlns=\"http://docs.oasis-open.org/odata/ns/edm\" Namespace=\"Service\">\n")
	b.WriteString("      <EntityContainer Name=\"Service\" Extends=\"ServiceRoot.v1_17_0.ServiceContainer\"/>\n")
	b.WriteString("    </Schema>\n  </edmx:DataServices>\n</edmx:Edmx>\n")
	w.Header().Set("Content-Type", "application/xml")
	w.Header().Set("OData-Version", "4.0")
	_, err := w.Write([]byte(b.String()))
	return err
}

func (s *Server) getOData(w http.ResponseWriter, r *http.Request) error {
	var value []map[string]string
	for _, n := range []string{"Systems", "Chassis", "Fabrics", "CompositionService", "SessionService", "AccountService",
		"EventService", "TaskService", "Managers"} {
		value = append(value, map[string]string{"name": n, "kind": "Singleton", "url": "/redfish/v1/" + n})
	}
	if s.tel != nil {
		value = append(value, map[string]string{"name": "TelemetryService", "kind": "Singleton", "url": telemetryPath})
	}
	value = append([]map[string]string{{"name": "Service", "kind": "Singleton", "url": "/redfish/v1/"}}, value...)
	writeJSON(w, http.StatusOK, map[string]any{"@odata.context": "/redfish/v1/$metadata", "value": value})
	return nil
}

func (s *Server) getSessionService(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, map[string]any{
		"@odata.id":      "/redfish/v1/SessionService",
		"@odata.type":    "#SessionService.v1_1_8.SessionService",
		"Id":             "SessionService",
		"Name":           "Session Service",
		"ServiceEnabled": true,
		"SessionTimeout": int(s.auth.IdleTimeout().Seconds()),
		"Sessions":       ref("/redfish/v1/SessionService/Sessions"),
	})
	return nil
}

func (s *Server) getSessions(w http.ResponseWriter, r *http.Request) error {
	p := principal(r)
	var members []odataID
	for _, sess := range s.auth.Sessions(r.Context()) {
		if p.Has(tenancy.ConfigureUsers) || sess.User == p.User {
			members = append(members, reff("/redfish/v1/SessionService/Sessions/%s", sess.ID))
		}
	}
	writeJSON(w, http.StatusOK, collection("/redfish/v1/SessionService/Sessions", "SessionCollection", "Session Collection", members))
	return nil
}

func sessionBody(sess tenancy.Session) map[string]any {
	return map[string]any{
		"@odata.id":   "/redfish/v1/SessionService/Sessions/" + sess.ID,
		"@odata.type": "#Session.v1_7_0.Session",
		"Id":          sess.ID,
		"Name":        "User Session",
		"UserName":    sess.User,
		"CreatedTime": sess.Created.UTC().Format("2006-01-02T15:04:05Z"),
	}
}

func (s *Server) postSession(w http.ResponseWriter, r *http.Request) error {
	if r.TLS == nil {
		s.denied(r, tenancy.Principal{}, "session creation over plain HTTP")
		return errInsecure(r.URL.Path)
	}
	var req struct {
		UserName *string
		Password *string
	}
	if err := decode(r, &req); err != nil {
		return err
	}
	if req.UserName == nil {
		return errPropertyMissing("UserName")
	}
	if req.Password == nil {
		return errPropertyMissing("Password")
	}
	noteAudit(r).user = *req.UserName
	sess, token, err := s.auth.Login(r.Context(), *req.UserName, *req.Password)
	if errors.Is(err, tenancy.ErrNoAccount) || errors.Is(err, tenancy.ErrLocked) {
		s.denied(r, tenancy.Principal{User: *req.UserName}, "login failed: "+err.Error())
		return errNoSession()
	}
	if err != nil {
		return err
	}
	w.Header().Set("X-Auth-Token", token)
	w.Header().Set("Location", "/redfish/v1/SessionService/Sessions/"+sess.ID)
	writeJSON(w, http.StatusCreated, sessionBody(sess))
	return nil
}

func (s *Server) getSession(w http.ResponseWriter, r *http.Request) error {
	sess, ok := s.auth.Session(r.Context(), r.PathValue("id"))
	if p := principal(r); !ok || (!p.Has(tenancy.ConfigureUsers) && sess.User != p.User) {
		return errNotFound("Session", r.PathValue("id"))
	}
	writeJSON(w, http.StatusOK, sessionBody(sess))
	return nil
}

func (s *Server) deleteSession(w http.ResponseWriter, r *http.Request) error {
	if sess, ok := s.auth.Session(r.Context(), r.PathValue("id")); ok && !principal(r).Has(tenancy.ConfigureUsers) && sess.User != principal(r).User {
		return errNotFound("Session", r.PathValue("id"))
	}
	if err := s.auth.Logout(r.Context(), r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
