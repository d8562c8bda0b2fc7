package rf

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"rackpool/internal/inventory"
	"rackpool/internal/jsonlimit"
)

// Registry is the prefix of the Base registry's MessageIds.
const Registry = "Base.1.22."

// Problem is one Base registry message and the HTTP status it is answered
// with.
type Problem struct {
	Status     int
	ID         string // MessageId, registry prefix included
	Text       string
	Args       []string
	Severity   string
	Resolution string
	// Related are the JSON pointers (#/Oem/Rackpool/Needs/0/Count) of the
	// properties the problem is about: RelatedProperties, so a client can
	// show the message next to the field.
	Related []string
	// Oem is the entry's Oem object ({"Rackpool": …}): detail the
	// service adds to the message; nil for none.
	Oem map[string]any
	// Internal is what went wrong inside the service: the service logs it
	// under the request's ID and never sends it.
	Internal error
}

// Pointer turns a property path as messages name it (Oem.Rackpool.Needs[0].Count,
// Links/ResourceBlocks) into the JSON pointer RelatedProperties carries.
func Pointer(prop string) string {
	r := strings.NewReplacer(".", "/", "[", "/", "]", "")
	return "#/" + strings.TrimPrefix(r.Replace(prop), "/")
}

// about sets the property p is about.
func (p *Problem) about(prop string) *Problem {
	p.Related = []string{Pointer(prop)}
	return p
}

func (p *Problem) Error() string { return p.Text }

// New returns a Problem. Client errors about properties and queries are
// warnings; every other error is critical.
func New(status int, id, text string, args ...string) *Problem {
	sev := "Critical"
	if status < 500 && (strings.Contains(id, "Property") || strings.Contains(id, "Query")) {
		sev = "Warning"
	}
	return &Problem{Status: status, ID: id, Text: text, Args: args, Severity: sev}
}

// Resolve sets the resolution and returns p.
func (p *Problem) Resolve(r string) *Problem {
	p.Resolution = r
	return p
}

// InsufficientPrivilege: the client's role lacks the privilege the
// request needs.
func InsufficientPrivilege() *Problem {
	return New(http.StatusForbidden, Registry+"InsufficientPrivilege",
		"There are insufficient privileges for the account or credentials associated with the current session to perform the requested operation.")
}

// NotFound: no resource of kind named name.
func NotFound(kind, name string) *Problem {
	return New(http.StatusNotFound, Registry+"ResourceNotFound",
		fmt.Sprintf("The requested resource of type %s named '%s' was not found.", kind, name), kind, name)
}

// Malformed: the body is not JSON (detail says why).
func Malformed(detail string) *Problem {
	return New(http.StatusBadRequest, Registry+"MalformedJSON",
		"The request body submitted was malformed JSON and could not be parsed by the receiving service.").
		Resolve("Ensure that the request body is valid JSON and resubmit the request. " + detail)
}

// PropertyType: value is of the wrong type for prop.
func PropertyType(prop, value string) *Problem {
	return New(http.StatusBadRequest, Registry+"PropertyValueTypeError",
		fmt.Sprintf("The value '%s' for the property %s is not a type that the property can accept.", value, prop), value, prop).about(prop)
}

// PropertyUnknown: the resource has no property prop.
func PropertyUnknown(prop string) *Problem {
	return New(http.StatusBadRequest, Registry+"PropertyUnknown",
		fmt.Sprintf("The property %s is not in the list of valid properties for the resource.", prop), prop).about(prop)
}

// PropertyDuplicate: the request names member path (a JSON pointer
// without its "#", e.g. "/Oem/Rackpool/Tenant") twice in one object.
// Accepting it would let the last one win while a reader of the first (a
// proxy, an audit filter, a reviewer) sees another request than the one
// carried out.
func PropertyDuplicate(path string) *Problem {
	p := New(http.StatusBadRequest, Registry+"PropertyDuplicate",
		fmt.Sprintf("The property %s was duplicated in the request.", path), path)
	p.Related = []string{"#" + path}
	return p
}

// PropertyNotWritable: prop cannot be changed by this service.
func PropertyNotWritable(prop string) *Problem {
	return New(http.StatusBadRequest, Registry+"PropertyNotWritable",
		fmt.Sprintf("The property %s is a read-only property and cannot be assigned a value.", prop), prop).about(prop)
}

// PropertyMissing: the required property prop is missing.
func PropertyMissing(prop string) *Problem {
	return New(http.StatusBadRequest, Registry+"PropertyMissing",
		fmt.Sprintf("The property %s is a required property and must be included in the request.", prop), prop).about(prop)
}

// PropertyValue: value is not acceptable for prop, for the reason why.
func PropertyValue(prop, value, why string) *Problem {
	return New(http.StatusBadRequest, Registry+"PropertyValueIncorrect",
		fmt.Sprintf("The property '%s' with the requested value of '%s' could not be written because the value is not acceptable for the property.", prop, value), prop, value).
		about(prop).Resolve(why)
}

// TooLarge: the body exceeds limit bytes.
func TooLarge(limit int64) *Problem {
	return New(http.StatusRequestEntityTooLarge, Registry+"PayloadTooLarge",
		"The supplied payload exceeds the maximum size supported by the service.").
		Resolve(fmt.Sprintf("Send a request body of at most %d bytes.", limit))
}

// TooMany: the body holds more than limit JSON values.
func TooMany(limit int) *Problem {
	return New(http.StatusRequestEntityTooLarge, Registry+"PayloadTooLarge",
		"The supplied payload exceeds the maximum size supported by the service.").
		Resolve(fmt.Sprintf("Send a request body of at most %d JSON values (objects, arrays, strings, numbers and literals).", limit))
}

// NoOperation: a PATCH whose body holds nothing to change (only OData
// annotations such as @odata.id), DSP0266 "PATCH (update)".
func NoOperation() *Problem {
	p := New(http.StatusBadRequest, Registry+"NoOperation",
		"The request body submitted contain no data to act upon and no changes to the resource took place.")
	p.Severity = "Warning"
	return p.Resolve("Add properties in the JSON object and resubmit the request.")
}

// Decode reads a JSON object body into v strictly: malformed JSON, wrong
// types, unknown properties and trailing data are Problems naming the
// property; a body over the http.MaxBytesReader limit is TooLarge(limit),
// and one nesting deeper than jsonlimit.MaxDepth is malformed before
// anything decodes it.
// Redfish annotations ("@odata.*") are ignored; a PATCH of annotations
// only is NoOperation.
func Decode(r *http.Request, v any, limit int64) error {
	// Read into one buffer of the announced size where there is one
	// (ReadAll would grow its way there, copying).
	buf := bytes.NewBuffer(make([]byte, 0, min(max(r.ContentLength, 0), limit)+bytes.MinRead))
	_, err := buf.ReadFrom(r.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return TooLarge(limit)
		}
		return Malformed(err.Error())
	}
	data := buf.Bytes()
	if len(bytes.TrimSpace(data)) == 0 {
		return Malformed("The request body is empty.")
	}
	if err := jsonlimit.Check(data, jsonlimit.MaxDepth); err != nil {
		return Malformed(fmt.Sprintf("The body nests objects and arrays deeper than %d levels.", jsonlimit.MaxDepth))
	}
	o := scanOutline(data)
	if o.values > MaxValues {
		return TooMany(MaxValues)
	}
	if o.dup != "" {
		return PropertyDuplicate(o.dup)
	}
	if !o.object {
		var raw json.RawMessage
		if err := json.Unmarshal(data, &raw); err != nil {
			return Malformed(err.Error())
		}
		return Malformed("The request body must be a JSON object.")
	}
	if r.Method == http.MethodPatch && o.members > 0 && o.annotations == o.members {
		return NoOperation()
	}
	clean := data
	if o.annotations > 0 {
		var raw map[string]json.RawMessage
		if err := json.Unmarshal(data, &raw); err != nil {
			return Malformed(err.Error())
		}
		for k := range raw {
			if strings.HasPrefix(k, "@odata.") {
				delete(raw, k)
			}
		}
		clean, _ = json.Marshal(raw)
	}
	dec := json.NewDecoder(bytes.NewReader(clean))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &te):
			field := te.Field
			if field == "" {
				field = "(body)"
			}
			return PropertyType(field, te.Value)
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			return PropertyUnknown(strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`))
		}
		return Malformed(err.Error())
	}
	if _, err := dec.Token(); err != io.EOF {
		return Malformed("The request body holds more than one JSON value.")
	}
	return nil
}

// FabricTypes is the Redfish FabricType (Protocol) of each fabric kind:
// an optical circuit switch has no Redfish protocol of its own, so it is
// OEM.
var FabricTypes = map[inventory.FabricKind]string{
	inventory.PCIeSwitch:     "PCIe",
	inventory.SASCircuit:     "SAS",
	inventory.EthernetVLAN:   "Ethernet",
	inventory.OpticalCircuit: "OEM",
	inventory.CXLMemory:      "CXL",
}

// ODataID is a Redfish reference.
type ODataID struct {
	ID string `json:"@odata.id"`
}

// DecodeLogin reads the body of a session login (DSP0266: UserName and
// Password, both required) strictly, as Decode does; LoginBody is the
// client's side.
func DecodeLogin(r *http.Request, limit int64) (user, password string, err error) {
	var req struct{ UserName, Password *string }
	if err := Decode(r, &req, limit); err != nil {
		return "", "", err
	}
	if req.UserName == nil {
		return "", "", PropertyMissing("UserName")
	}
	if req.Password == nil {
		return "", "", PropertyMissing("Password")
	}
	return *req.UserName, *req.Password, nil
}

// Ref returns a reference to id.
func Ref(id string) ODataID { return ODataID{ID: id} }

// Reff returns a reference to the formatted id.
func Reff(format string, args ...any) ODataID { return ODataID{ID: fmt.Sprintf(format, args...)} }

// Collection is the body of a resource collection of type typ.
func Collection(id, typ, name string, members []ODataID) map[string]any {
	if members == nil {
		members = []ODataID{}
	}
	return map[string]any{
		"@odata.id":           id,
		"@odata.type":         "#" + typ + "." + typ,
		"Name":                name,
		"Members":             members,
		"Members@odata.count": len(members),
	}
}

// SchemaRef is one DMTF schema a service's $metadata references: File is
// the schema file's name without "_v1.xml" (default: Namespace), Version
// the versioned namespace to include too ("" for none, e.g. a collection).
type SchemaRef struct {
	File, Namespace, Version string
}

// WriteMetadata answers GET /redfish/v1/$metadata: the DMTF schemas in
// refs, the service's own OEM schema at oemURI with its namespaces, and
// the service container.
func WriteMetadata(w http.ResponseWriter, refs []SchemaRef, oemURI string, oemNamespaces []string) error {
	var b strings.Builder
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	b.WriteString(`<edmx:Edmx xmlns:edmx="http://docs.oasis-open.org/odata/ns/edmx" Version="4.0">` + "\n")
	for _, n := range refs {
		file := n.File
		if file == "" {
			file = n.Namespace
		}
		fmt.Fprintf(&b, "  <edmx:Reference Uri=\"http://redfish.dmtf.org/schemas/v1/%s_v1.xml\">\n", file)
		fmt.Fprintf(&b, "    <edmx:Include Namespace=\"%s\"/>\n", n.Namespace)
		if n.Version != "" {
			fmt.Fprintf(&b, "    <edmx:Include Namespace=\"%s.%s\"/>\n", n.Namespace, n.Version)
		}
		b.WriteString("  </edmx:Reference>\n")
	}
	fmt.Fprintf(&b, "  <edmx:Reference Uri=\"%s\">\n", oemURI)
	for _, ns := range oemNamespaces {
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
