package redfish

import (
	"context"
	"errors"
	"net/http"
	"time"

	"rackpool/internal/odata"
	"rackpool/internal/rf"
	"rackpool/internal/tenancy"
)

// sessionService is what the SessionService's handlers need of the
// accounts (tenancy.Service).
type sessionService interface {
	Login(ctx context.Context, user, password, source string) (tenancy.Session, string, error)
	Logout(ctx context.Context, id string) error
	Session(ctx context.Context, id string) (tenancy.Session, bool)
	Sessions(ctx context.Context) []tenancy.Session
	ActiveSessions(ctx context.Context) int
	IdleTimeout() time.Duration
}

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
			// What package odata implements.
			"ExcerptQuery": false, "OnlyMemberQuery": true, "SelectQuery": true,
			"ExpandQuery": map[string]any{"ExpandAll": true, "Levels": true, "Links": true, "NoLinks": true,
				"MaxLevels": odata.MaxExpandLevels},
			"FilterQuery": true, "FilterQueryComparisonOperations": true, "FilterQueryCompoundOperations": true, "TopSkipQuery": true,
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
var metadataNamespaces = []rf.SchemaRef{
	{Namespace: "ServiceRoot", Version: "v1_17_0"},
	{Namespace: "ComputerSystemCollection"},
	{Namespace: "ComputerSystem", Version: "v1_22_0"},
	{Namespace: "ChassisCollection"},
	{Namespace: "Chassis", Version: "v1_25_0"},
	{Namespace: "CompositionService", Version: "v1_2_0"},
	{Namespace: "ResourceBlockCollection"},
	{Namespace: "ResourceBlock", Version: "v1_4_0"},
	{Namespace: "ZoneCollection"},
	{Namespace: "Zone", Version: "v1_6_0"},
	{Namespace: "FabricCollection"},
	{Namespace: "Fabric", Version: "v1_3_0"},
	{Namespace: "SwitchCollection"},
	{Namespace: "Switch", Version: "v1_9_0"},
	{Namespace: "PortCollection"},
	{Namespace: "Port", Version: "v1_11_0"},
	{Namespace: "EndpointCollection"},
	{Namespace: "Endpoint", Version: "v1_8_0"},
	{Namespace: "SessionService", Version: "v1_1_8"},
	{Namespace: "SessionCollection"},
	{Namespace: "Session", Version: "v1_7_0"},
	{Namespace: "CollectionCapabilities", Version: "v1_4_0"},
	{Namespace: "Message", Version: "v1_1_1"},
	{Namespace: "Resource", Version: "v1_19_0"},
	{Namespace: "AccountService", Version: "v1_15_0"},
	{Namespace: "ManagerAccountCollection"},
	{Namespace: "ManagerAccount", Version: "v1_12_0"},
	{Namespace: "RoleCollection"},
	{Namespace: "Role", Version: "v1_3_0"},
	{Namespace: "CompositionReservationCollection"},
	{Namespace: "CompositionReservation", Version: "v1_0_0"},
	{Namespace: "ActionInfo", Version: "v1_3_0"},
	{Namespace: "Manifest", Version: "v1_1_0"},
	{Namespace: "TaskService", Version: "v1_2_0"},
	{Namespace: "TaskCollection"},
	{Namespace: "Task", Version: "v1_7_0"},
	{Namespace: "EventService", Version: "v1_10_0"},
	{Namespace: "EventDestinationCollection"},
	{Namespace: "EventDestination", Version: "v1_14_0"},
	{Namespace: "Event", Version: "v1_9_0"},
	{Namespace: "ManagerCollection"},
	{Namespace: "Manager", Version: "v1_19_0"},
	{Namespace: "LogServiceCollection"},
	{Namespace: "LogService", Version: "v1_5_0"},
	{Namespace: "LogEntryCollection"},
	{Namespace: "LogEntry", Version: "v1_15_0"},
	{Namespace: "EthernetInterfaceCollection"},
	{Namespace: "EthernetInterface", Version: "v1_12_4"},
	{Namespace: "IPAddresses", Version: "v1_1_5"},
	{Namespace: "ManagerNetworkProtocol", Version: "v1_12_0"},
	{Namespace: "ConnectionCollection"},
	{Namespace: "PCIeDeviceCollection"},
	{Namespace: "PCIeDevice", Version: "v1_21_0"},
	{Namespace: "CXLLogicalDeviceCollection"},
	{Namespace: "CXLLogicalDevice", Version: "v1_3_0"},
	{Namespace: "MemoryDomainCollection"},
	{Namespace: "MemoryDomain", Version: "v1_5_1"},
	{Namespace: "MemoryChunksCollection"},
	{Namespace: "MemoryChunks", Version: "v1_6_2"},
	{Namespace: "Connection", Version: "v1_3_0"},
	{Namespace: "TelemetryService", Version: "v1_4_1"},
	{Namespace: "MetricDefinitionCollection"},
	{Namespace: "MetricDefinition", Version: "v1_3_5"},
	{Namespace: "MetricReportDefinitionCollection"},
	{Namespace: "MetricReportDefinition", Version: "v1_4_7"},
	{Namespace: "MetricReportCollection"},
	{Namespace: "MetricReport", Version: "v1_5_2"},
}

func (s *Server) getMetadata(w http.ResponseWriter, r *http.Request) error {
	// The OEM schema (oem_schema.go) is served by the service itself.
	return rf.WriteMetadata(w, metadataNamespaces, rackpoolSchemaURI, []string{"Rackpool", rackpoolOemNamespace, "RackpoolTopology", "RackpoolTopology.v1_0_0",
		"RackpoolTenantCollection", "RackpoolTenant", "RackpoolTenant.v1_0_0"})
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
	sess, token, err := s.auth.Login(r.Context(), *req.UserName, *req.Password, clientAddr(r))
	if errors.Is(err, tenancy.ErrNoAccount) || errors.Is(err, tenancy.ErrLocked) {
		s.denied(r, tenancy.Principal{User: *req.UserName}, "login failed: "+err.Error())
		e := errNoSession()
		e.noBasic = sessionClient(r)
		return e
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
