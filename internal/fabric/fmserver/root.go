package fmserver

import (
	_ "embed"
	"fmt"
	"net/http"
	"strings"
)

// serviceRoutes are the routes of the service root and the OData
// documents, all public.
var serviceRoutes = []route{
	{"GET /redfish", public, (*Server).getVersions},
	{"GET /redfish/v1", public, (*Server).getServiceRoot},
	{"GET /redfish/v1/{$}", public, (*Server).getServiceRoot},
	{"GET /redfish/v1/$metadata", public, (*Server).getMetadata},
	{"GET /redfish/v1/odata", public, (*Server).getOData},
	{"GET /redfish/v1/Schemas/Rackpool_v1.xml", public, (*Server).getSchema},
}

// The OEM schema declares the fault-injection actions and the Fabric's
// Oem.Rackpool object, so the DMTF validator checks them like standard
// properties. It is served here and referenced from $metadata.
//
//go:embed schemas/Rackpool_v1.xml
var oemSchema []byte

const oemSchemaURI = "/redfish/v1/Schemas/Rackpool_v1.xml"

func (s *Server) getVersions(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, map[string]string{"v1": "/redfish/v1/"})
	return nil
}

func (s *Server) getServiceRoot(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, map[string]any{
		"@odata.id":      "/redfish/v1",
		"@odata.type":    "#ServiceRoot.v1_17_0.ServiceRoot",
		"Id":             "RootService",
		"Name":           "rackpool fabric manager (emulated " + string(s.fab.Kind) + " fabric " + s.fab.ID + ")",
		"RedfishVersion": "1.21.0",
		"UUID":           s.uuid,
		"Product":        "rackpool fabric-emulator",
		"Vendor":         "rackpool",
		"Fabrics":        ref("/redfish/v1/Fabrics"),
		"Systems":        ref("/redfish/v1/Systems"),
		"Chassis":        ref("/redfish/v1/Chassis"),
		"SessionService": ref("/redfish/v1/SessionService"),
		"Tasks":          ref("/redfish/v1/TaskService"),
		"Links":          map[string]any{"Sessions": ref("/redfish/v1/SessionService/Sessions")},
		"ProtocolFeaturesSupported": map[string]any{
			"ExcerptQuery": false, "OnlyMemberQuery": false, "SelectQuery": false, "FilterQuery": false,
			"ExpandQuery": map[string]any{"ExpandAll": false, "Levels": false, "Links": false, "NoLinks": false},
		},
	})
	return nil
}

// metadataNamespaces lists the schemas the server uses, for $metadata.
var metadataNamespaces = []struct{ ns, version string }{
	{"ServiceRoot", "v1_17_0"},
	{"SessionService", "v1_1_8"},
	{"SessionCollection", ""},
	{"Session", "v1_7_0"},
	{"TaskService", "v1_2_0"},
	{"TaskCollection", ""},
	{"Task", "v1_7_0"},
	{"FabricCollection", ""},
	{"Fabric", "v1_3_0"},
	{"SwitchCollection", ""},
	{"Switch", "v1_9_0"},
	{"PortCollection", ""},
	{"Port", "v1_11_0"},
	{"EndpointCollection", ""},
	{"Endpoint", "v1_8_0"},
	{"ZoneCollection", ""},
	{"Zone", "v1_6_0"},
	{"ConnectionCollection", ""},
	{"Connection", "v1_3_0"},
	{"ComputerSystemCollection", ""},
	{"ComputerSystem", "v1_22_0"},
	{"ChassisCollection", ""},
	{"Chassis", "v1_25_0"},
	{"MemoryDomainCollection", ""},
	{"MemoryDomain", "v1_5_1"},
	{"MemoryChunksCollection", ""},
	{"MemoryChunks", "v1_6_2"},
	{"Message", "v1_1_1"},
	{"Resource", "v1_19_0"},
}

func (s *Server) getMetadata(w http.ResponseWriter, r *http.Request) error {
	var b strings.Builder
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	b.WriteString(`<edmx:Edmx xmlns:edmx="http://docs.oasis-open.org/odata/ns/edmx" Version="4.0">` + "\n")
	for _, n := range metadataNamespaces {
		fmt.Fprintf(&b, "  <edmx:Reference Uri=\"http://redfish.dmtf.org/schemas/v1/%s_v1.xml\">\n", n.ns)
		fmt.Fprintf(&b, "    <edmx:Include Namespace=\"%s\"/>\n", n.ns)
		if n.version != "" {
			fmt.Fprintf(&b, "    <edmx:Include Namespace=\"%s.%s\"/>\n", n.ns, n.version)
		}
		b.WriteString("  </edmx:Reference>\n")
	}
	fmt.Fprintf(&b, "  <edmx:Reference Uri=\"%s\">\n", oemSchemaURI)
	b.WriteString("    <edmx:Include Namespace=\"Rackpool\"/>\n    <edmx:Include Namespace=\"Rackpool.v1_0_0\"/>\n  </edmx:Reference>\n")
	b.WriteString("  <edmx:DataServices>\n    <Schema xmlns=\"http://docs.oasis-open.org/odata/ns/edm\" Namespace=\"Service\">\n")
	b.WriteString("      <EntityContainer Name=\"Service\" Extends=\"ServiceRoot.v1_17_0.ServiceContainer\"/>\n")
	b.WriteString("    </Schema>\n  </edmx:DataServices>\n</edmx:Edmx>\n")
	w.Header().Set("Content-Type", "application/xml")
	w.Header().Set("OData-Version", "4.0")
	_, err := w.Write([]byte(b.String()))
	return err
}

func (s *Server) getOData(w http.ResponseWriter, r *http.Request) error {
	value := []map[string]string{{"name": "Service", "kind": "Singleton", "url": "/redfish/v1/"}}
	for _, n := range []string{"Fabrics", "Systems", "Chassis", "SessionService", "TaskService"} {
		value = append(value, map[string]string{"name": n, "kind": "Singleton", "url": "/redfish/v1/" + n})
	}
	writeJSON(w, http.StatusOK, map[string]any{"@odata.context": "/redfish/v1/$metadata", "value": value})
	return nil
}

func (s *Server) getSchema(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Content-Type", "application/xml")
	w.Header().Set("OData-Version", "4.0")
	_, err := w.Write(oemSchema)
	return err
}
