package redfish_test

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

// Fast, Go-side versions of what scripts/conformance.sh checks with the
// DMTF validators (make conformance), so that `go test` catches the usual
// slips: an @odata.type whose namespace $metadata does not include or whose
// version the DMTF CSDL does not have, an OEM property the OEM schema does
// not declare, an untyped Oem.Rackpool object.

// untypedOemAllowed lists the resources (path prefixes) whose Oem.Rackpool
// object has no @odata.type yet. Each is a DMTF validator WARN (a FAIL for
// a resource without @odata.type). To fix one: declare a complex type in
// schemas/Rackpool_v1.xml, build the object with rackpoolOem("Type", ...),
// and remove the prefix here.
var untypedOemAllowed = []string{}

// untypedResourceAllowed lists resources (path prefixes) served without
// an @odata.type yet: a DMTF validator FAIL. Give each a type (an OEM
// entity type in schemas/Rackpool_v1.xml for OEM resources) and remove it
// here.
var untypedResourceAllowed = []string{}

// dmtfCSDL is the DMTF schema directory the repository carries
// (testdata/redfish-dmtf/csdl); a checkout without it fails the test.
func dmtfCSDL(t *testing.T) string {
	t.Helper()
	dir := filepath.Join("..", "..", "testdata", "redfish-dmtf", "csdl")
	if _, err := os.Stat(filepath.Join(dir, "ServiceRoot_v1.xml")); err != nil {
		t.Fatalf("DMTF CSDL missing from the repository: %v", err)
	}
	return dir
}

// csdlType is an entity or complex type of a CSDL schema.
type csdlType struct {
	Name     string     `xml:"Name,attr"`
	BaseType string     `xml:"BaseType,attr"`
	Props    []csdlProp `xml:"Property"`
	NavProps []csdlProp `xml:"NavigationProperty"`
	Annots   []struct {
		Term string `xml:"Term,attr"`
	} `xml:"Annotation"`
}

type csdlProp struct {
	Name string `xml:"Name,attr"`
	Type string `xml:"Type,attr"`
}

type csdlDoc struct {
	Refs []struct {
		URI      string `xml:"Uri,attr"`
		Includes []struct {
			Namespace string `xml:"Namespace,attr"`
		} `xml:"Include"`
	} `xml:"Reference"`
	Schemas []struct {
		Namespace    string     `xml:"Namespace,attr"`
		ComplexTypes []csdlType `xml:"ComplexType"`
		EntityTypes  []csdlType `xml:"EntityType"`
		Actions      []struct {
			Name string `xml:"Name,attr"`
		} `xml:"Action"`
	} `xml:"DataServices>Schema"`
}

// oemSchema is the OEM CSDL as the service serves it.
type oemSchema struct {
	types   map[string]csdlType // qualified name
	actions map[string]bool     // Rackpool.Explain
}

func loadOEMSchema(t *testing.T, data []byte) oemSchema {
	t.Helper()
	var doc csdlDoc
	if err := xml.Unmarshal(data, &doc); err != nil {
		t.Fatalf("OEM schema: %v", err)
	}
	o := oemSchema{types: map[string]csdlType{}, actions: map[string]bool{}}
	for _, s := range doc.Schemas {
		for _, ty := range append(slices.Clone(s.ComplexTypes), s.EntityTypes...) {
			o.types[s.Namespace+"."+ty.Name] = ty
		}
		for _, a := range s.Actions {
			o.actions[s.Namespace+"."+a.Name] = true
		}
	}
	return o
}

// check reports every property of v that type typ does not declare,
// recursing into properties of OEM-schema types.
func (o oemSchema) check(t *testing.T, where, typ string, v map[string]any) {
	t.Helper()
	ty, ok := o.types[typ]
	if !ok {
		t.Errorf("%s: type %s is not in the OEM schema", where, typ)
		return
	}
	declared := map[string]string{}
	for _, p := range append(slices.Clone(ty.Props), ty.NavProps...) {
		declared[p.Name] = p.Type
	}
	dynamic := false
	for _, a := range ty.Annots {
		dynamic = dynamic || a.Term == "Redfish.DynamicPropertyPatterns"
	}
	for k, val := range v {
		if strings.Contains(k, "@") {
			continue // annotations: @odata.type, @odata.id, ...
		}
		pt, ok := declared[k]
		if !ok {
			if !dynamic {
				t.Errorf("%s: property %s is not declared in %s (schemas/Rackpool_v1.xml)", where, k, typ)
			}
			continue
		}
		pt = strings.TrimSuffix(strings.TrimPrefix(pt, "Collection("), ")")
		if _, ours := o.types[pt]; !ours {
			continue
		}
		switch x := val.(type) {
		case map[string]any:
			o.check(t, where+"/"+k, pt, x)
		case []any:
			for _, e := range x {
				if m, ok := e.(map[string]any); ok {
					o.check(t, where+"/"+k, pt, m)
				}
			}
		}
	}
}

// TestSchemaConformance walks the service (with a composed system, so
// composed resources and fabric zones exist) and checks every @odata.type
// against $metadata, the DMTF CSDL and the OEM schema.
func TestSchemaConformance(t *testing.T) {
	s := newService(t)
	s.compose(specificBody("host1", "gpu1", "memnode1-b01", "hdd3", "essd1"))

	meta := s.must(http.StatusOK, "GET", "/redfish/v1/$metadata", nil, cred{})
	var doc csdlDoc
	if err := xml.Unmarshal(meta.body, &doc); err != nil {
		t.Fatalf("$metadata: %v", err)
	}
	included := map[string]bool{}
	oemURI := ""
	for _, r := range doc.Refs {
		for _, inc := range r.Includes {
			included[inc.Namespace] = true
			if inc.Namespace == "Rackpool" {
				oemURI = r.URI
			}
		}
	}
	if !strings.HasPrefix(oemURI, "/redfish/v1/") {
		t.Fatalf("$metadata references the OEM schema at %q, not on the service", oemURI)
	}
	schemaReply := s.must(http.StatusOK, "GET", oemURI, nil, cred{}) // public, like $metadata
	if ct := schemaReply.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/xml") {
		t.Errorf("OEM schema Content-Type %q", ct)
	}
	oem := loadOEMSchema(t, schemaReply.body)
	csdl := dmtfCSDL(t)

	types := map[string]string{} // @odata.type -> first path
	queue, seen := []string{"/redfish/v1"}, map[string]bool{"/redfish/v1": true}
	for len(queue) > 0 {
		path := queue[0]
		queue = queue[1:]
		r := s.do("GET", path, nil, admin)
		if r.status != http.StatusOK {
			continue // TestWalkService reports dangling links
		}
		var body any
		if json.Unmarshal(r.body, &body) != nil {
			continue
		}
		if m, ok := body.(map[string]any); ok && m["@odata.type"] == nil &&
			!slices.ContainsFunc(untypedResourceAllowed, func(p string) bool { return strings.HasPrefix(path, p) }) {
			t.Errorf("%s: the resource has no @odata.type", path)
		}
		var visit func(v any, where string)
		visit = func(v any, where string) {
			switch x := v.(type) {
			case map[string]any:
				if typ, ok := x["@odata.type"].(string); ok {
					if _, ok := types[typ]; !ok {
						types[typ] = where
					}
					if strings.HasPrefix(typ, "#RackpoolTopology.") {
						oem.check(t, where, strings.TrimPrefix(typ, "#"), x)
					}
				}
				if id, ok := x["@odata.id"].(string); ok {
					id, _, _ = strings.Cut(id, "#")
					if !seen[id] && strings.HasPrefix(id, "/redfish/v1") {
						seen[id] = true
						queue = append(queue, id)
					}
				}
				if o, ok := x["Oem"].(map[string]any); ok {
					if rp, ok := o["Rackpool"].(map[string]any); ok {
						switch typ, _ := rp["@odata.type"].(string); {
						case strings.HasPrefix(typ, "#Rackpool."):
							oem.check(t, where+"/Oem/Rackpool", strings.TrimPrefix(typ, "#"), rp)
						case typ != "":
							t.Errorf("%s/Oem/Rackpool: @odata.type %s is not a Rackpool type", where, typ)
						case !slices.ContainsFunc(untypedOemAllowed, func(p string) bool { return strings.HasPrefix(where, p) }):
							t.Errorf("%s/Oem/Rackpool has no @odata.type: use rackpoolOem (oem_schema.go)", where)
						}
					}
				}
				if a, ok := x["Actions"].(map[string]any); ok {
					if o, ok := a["Oem"].(map[string]any); ok {
						for name := range o {
							if strings.HasPrefix(name, "#") && !oem.actions[strings.TrimPrefix(name, "#")] {
								t.Errorf("%s: OEM action %s is not declared in the OEM schema", where, name)
							}
						}
					}
				}
				for k, e := range x {
					visit(e, where+"/"+k)
				}
			case []any:
				for _, e := range x {
					visit(e, where)
				}
			}
		}
		visit(body, path)
	}
	if len(seen) < 500 {
		t.Fatalf("walked only %d resources", len(seen))
	}

	var names []string
	for typ := range types {
		names = append(names, typ)
	}
	sort.Strings(names)
	for _, typ := range names {
		where := types[typ]
		q := strings.TrimPrefix(typ, "#")
		i := strings.LastIndex(q, ".")
		if i < 0 {
			t.Errorf("%s: malformed @odata.type %q", where, typ)
			continue
		}
		ns := q[:i] // ComputerSystem.v1_22_0, ComputerSystemCollection
		if !included[ns] {
			t.Errorf("%s: @odata.type %s: $metadata does not include namespace %s", where, typ, ns)
		}
		base, _, versioned := strings.Cut(ns, ".")
		if strings.HasPrefix(base, "Rackpool") {
			if _, ok := oem.types[q]; !ok {
				t.Errorf("%s: @odata.type %s is not in the OEM schema", where, typ)
			}
			continue
		}
		if csdl == "" || !versioned {
			continue
		}
		data, err := os.ReadFile(filepath.Join(csdl, base+"_v1.xml"))
		if err != nil {
			t.Errorf("%s: @odata.type %s: no DMTF schema %s_v1.xml", where, typ, base)
			continue
		}
		if !bytes.Contains(data, []byte(`Namespace="`+ns+`"`)) {
			t.Errorf("%s: @odata.type %s: the DMTF schema has no namespace %s", where, typ, ns)
		}
	}
	t.Logf("walked %d resources, %d types", len(seen), len(types))
}

// TestProtocolPreflight: the DSP0266 rules ServeHTTP applies before
// routing (protocol.go).
func TestProtocolPreflight(t *testing.T) {
	s := newService(t)
	r := s.do("GET", "/redfish/v1/", nil, cred{hdr: map[string]string{"OData-Version": "4.1"}})
	if r.status != http.StatusPreconditionFailed || !strings.HasSuffix(r.errorCode(t), ".HeaderInvalid") {
		t.Errorf("OData-Version 4.1: %d %s, want 412 HeaderInvalid", r.status, r.body)
	}
	s.must(http.StatusOK, "GET", "/redfish/v1/", nil, cred{hdr: map[string]string{"OData-Version": "4.0"}})

	// POST to a collection's Members is a POST to the collection.
	r = s.must(http.StatusCreated, "POST", "/redfish/v1/SessionService/Sessions/Members",
		map[string]string{"UserName": "Administrator", "Password": password}, cred{})
	if loc := r.header.Get("Location"); !strings.HasPrefix(loc, "/redfish/v1/SessionService/Sessions/") || r.header.Get("X-Auth-Token") == "" {
		t.Errorf("session via Members: Location %q, token set %v", loc, r.header.Get("X-Auth-Token") != "")
	}
	// ... but only where the collection takes a POST.
	if r := s.do("POST", "/redfish/v1/Chassis/Members", `{}`, admin); r.status < 400 {
		t.Errorf("POST /Chassis/Members: %d, want an error", r.status)
	}

	// A PATCH of OData annotations only changes nothing: 400 NoOperation.
	id := s.compose(specificBody("host1", "gpu1"))
	before := s.get("/redfish/v1/Systems/" + id)
	r = s.do("PATCH", "/redfish/v1/Systems/"+id, map[string]string{"@odata.id": "/redfish/v1/Systems/" + id}, admin)
	if r.status != http.StatusBadRequest || !strings.HasSuffix(r.errorCode(t), ".NoOperation") {
		t.Errorf("PATCH of @odata.id only: %d %s, want 400 NoOperation", r.status, r.body)
	}
	if after := s.get("/redfish/v1/Systems/" + id); !slices.Equal(systemBlocks(t, before), systemBlocks(t, after)) {
		t.Errorf("the PATCH changed the system: %v -> %v", systemBlocks(t, before), systemBlocks(t, after))
	}
}
