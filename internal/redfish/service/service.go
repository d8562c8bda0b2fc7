// Package service is what the northbound Redfish service's resource
// families share with its core (package redfish), so that a family can
// live in a package of its own without importing the core: the route type
// and the privileges routes require, the principal of an admitted request,
// the notes a handler adds to its request's audit entry, the JSON answer
// shaped by the request's query, and the core's tenant hiding.
//
// The core (redfish.Server) admits every request (rf.Policy.Wrap), puts
// the principal and the audit notes on its context, and wraps the writer
// in one that shapes a GET's body (Shaper); it imports the families and
// gathers their route tables. A family imports this package and
// internal/rf, never the core. Errors a family returns are *rf.Problem
// (or any error the core's translate knows); the core renders every one
// in the one Redfish error shape.
package service

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"time"

	"rackpool/internal/compose"
	"rackpool/internal/inventory"
	"rackpool/internal/rf"
	"rackpool/internal/tenancy"
)

// The privileges routes require (rf.Privilege), named as tenancy's roles
// grant them.
const (
	Public              = rf.Public                                 // no authentication
	Login               = rf.Privilege(tenancy.Login)               // any authenticated account
	ConfigureComponents = rf.Privilege(tenancy.ConfigureComponents) // compositions, reservations, connections
	ConfigureUsers      = rf.Privilege(tenancy.ConfigureUsers)      // accounts and tenants
	ConfigureManager    = rf.Privilege(tenancy.ConfigureManager)    // service-wide settings, faults, logs
	ConfigureSelf       = rf.Privilege(tenancy.ConfigureSelf)       // one's own account and sessions
	HostAgent           = rf.Privilege(tenancy.HostAgent)           // a host agent's steps (rackpool's OEM privilege)
)

// Route is one endpoint of a resource family whose handlers are methods
// of H: a literal "METHOD /path" pattern, as http.ServeMux takes it,
// beside the privilege it requires.
type Route[H any] struct {
	Pattern string
	Priv    rf.Privilege
	Handler func(H, http.ResponseWriter, *http.Request) error
}

// Hider is the core's tenant hiding: Hide refuses r a resource that exists
// but belongs to another tenant with the same 404 as for one that does not
// exist, and audits the attempt as denied.
type Hider interface {
	Hide(r *http.Request, kind, id string) error
}

type principalKey struct{}

// WithPrincipal returns ctx carrying p, the authenticated identity of its
// request.
func WithPrincipal(ctx context.Context, p tenancy.Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// Principal returns the authenticated identity of r (zero for public
// routes).
func Principal(r *http.Request) tenancy.Principal {
	p, _ := r.Context().Value(principalKey{}).(tenancy.Principal)
	return p
}

// Notes is what a handler may add to its request's audit entry (the
// core's audit record of every mutation and refusal).
type Notes interface {
	// Detail sets the entry's detail.
	Detail(detail string)
	// Routine marks a successful request that changed nothing worth a
	// record (a push of samples every few seconds): it is not audited.
	Routine()
}

type notesKey struct{}

// WithNotes returns ctx carrying n, its request's audit notes.
func WithNotes(ctx context.Context, n Notes) context.Context {
	return context.WithValue(ctx, notesKey{}, n)
}

// NotesOf returns the audit notes ctx carries.
func NotesOf(ctx context.Context) (Notes, bool) {
	n, ok := ctx.Value(notesKey{}).(Notes)
	return n, ok
}

// NoteRoutine marks r's request as routine (Notes.Routine); a request
// without notes is left as it is.
func NoteRoutine(r *http.Request) {
	if n, ok := NotesOf(r.Context()); ok {
		n.Routine()
	}
}

// Shaper is the writer the core gives every handler: Shape gives a GET's
// or HEAD's 200 body its ETag and applies the request's query to it
// ($select, $expand, only, ...). It returns the body to send, or done when
// it has answered itself (304, or the query's error).
type Shaper interface {
	Shape(w http.ResponseWriter, v any) (out any, done bool)
}

// WriteJSON sends v as the JSON body. Answered 200 through a Shaper (the
// core's writer), it is shaped first.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("OData-Version", "4.0")
	if s := shaperOf(w); s != nil && status == http.StatusOK {
		var done bool
		if v, done = s.Shape(w, v); done {
			return
		}
	}
	rf.WriteJSON(w, status, v)
}

// shaperOf finds the Shaper under w, nil if there is none.
func shaperOf(w http.ResponseWriter) Shaper {
	for {
		switch x := w.(type) {
		case Shaper:
			return x
		case interface{ Unwrap() http.ResponseWriter }:
			w = x.Unwrap()
		default:
			return nil
		}
	}
}

// ErrQueryValue refuses a query parameter's value.
func ErrQueryValue(name, value string) *rf.Problem {
	return rf.New(http.StatusBadRequest, rf.Registry+"QueryParameterValueFormatError",
		fmt.Sprintf("The value '%s' for the parameter %s is not a format that the parameter can accept.", value, name), value, name)
}

// ISODuration writes d, in whole seconds, as an ISO 8601 duration
// (PT1H2M3S), as Redfish properties of type Duration take it.
func ISODuration(d time.Duration) string {
	secs := int64(d / time.Second)
	out := "PT"
	if h := secs / 3600; h > 0 {
		out += fmt.Sprintf("%dH", h)
	}
	if m := secs % 3600 / 60; m > 0 {
		out += fmt.Sprintf("%dM", m)
	}
	if sec := secs % 60; sec > 0 || out == "PT" {
		out += fmt.Sprintf("%dS", sec)
	}
	return out
}

// OemNamespace is the versioned namespace of rackpool's OEM types
// (schemas/Rackpool_v1.xml, which the core serves).
const OemNamespace = "Rackpool.v1_0_0"

// RackpoolOem returns the Oem property {"Rackpool": props} with props typed
// as the OEM complex type typ (ResourceBlock, Chassis, ...).
func RackpoolOem(typ string, props map[string]any) map[string]any {
	props["@odata.type"] = "#" + OemNamespace + "." + typ
	return map[string]any{"Rackpool": props}
}

// BlocksPath is the collection of ResourceBlocks, as links to a block
// begin.
const BlocksPath = "/redfish/v1/CompositionService/ResourceBlocks/"

// ChassisOf is the Id of the chassis device d sits in: its drawer's
// ("falcon1-drawer1"), its own for a memory device (a CXL memory device, a
// memory node: "memnode1"), or else its fabric's enclosure ("sas1").
func ChassisOf(d *inventory.Device) string {
	switch {
	case d.Drawer != nil:
		return d.Fabric.ID + "-" + d.Drawer.ID
	case d.Kind == inventory.Memory:
		return d.ID
	}
	return d.Fabric.ID
}

// IsDrive reports whether blocks of kind k are drives.
func IsDrive(k inventory.Kind) bool {
	return k == inventory.NVMe || k == inventory.SSD || k == inventory.HDD
}

// DrivePath is the URI of drive block b: a Drive of its device's chassis.
func DrivePath(b *inventory.Block) string {
	return "/redfish/v1/Chassis/" + ChassisOf(b.Device) + "/Drives/" + b.ID
}

// PCIeFunctionPath is the URI of device d's PCIe function, in its drawer
// chassis' PCIeDevices; "" for a device in no drawer.
func PCIeFunctionPath(d *inventory.Device) string {
	if d.Drawer == nil {
		return ""
	}
	return "/redfish/v1/Chassis/" + ChassisOf(d) + "/PCIeDevices/" + d.ID + "/PCIeFunctions/1"
}

// ETag is the weak ETag of a record at version v (a composed system, an
// account).
func ETag(v int64) string { return fmt.Sprintf(`W/"%d"`, v) }

// NonNil returns s, or an empty slice for nil: a JSON array, never null.
func NonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// RandomHex returns n random bytes in hex (IDs of requests, tasks,
// subscriptions).
func RandomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// NoteDetail sets the detail of r's audit entry (Notes.Detail); a request
// without notes is left as it is.
func NoteDetail(r *http.Request, detail string) {
	if n, ok := NotesOf(r.Context()); ok {
		n.Detail(detail)
	}
}

// ClientAddr is the address of r's client (the connection's peer: a
// forwarding header is the client's to write, so it is not trusted).
func ClientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// Systems finds composed systems (compose.Manager).
type Systems interface {
	Get(id string) (*inventory.Composition, error)
}

// VisibleSystem returns composed system id if r's principal may see it;
// another tenant's is hidden (h), as if it did not exist.
func VisibleSystem(r *http.Request, systems Systems, h Hider, id string) (*inventory.Composition, error) {
	c, err := systems.Get(id)
	if err != nil {
		return nil, err
	}
	if !Principal(r).Sees(c.Tenant) {
		return nil, h.Hide(r, "ComputerSystem", id)
	}
	return c, nil
}

// Statuses are the blocks' statuses (compose.Manager).
type Statuses interface {
	BlockStatus(id string) compose.BlockStatus
}

// VisibleBlock is BlockVisible for a block whose status the caller has not
// read: an operator (no tenant) sees every block without the status lookup
// (collections of 10,000 blocks stay one pass over the topology).
func VisibleBlock(p tenancy.Principal, b *inventory.Block, st Statuses) bool {
	return p.Tenant == "" || BlockVisible(p, b, st.BlockStatus(b.ID))
}

// VisibleSystems filters composition IDs to those p may see.
func VisibleSystems(p tenancy.Principal, systems Systems, ids []string) []string {
	if p.Tenant == "" {
		return ids
	}
	var out []string
	for _, id := range ids {
		if c, err := systems.Get(id); err == nil && p.Sees(c.Tenant) {
			out = append(out, id)
		}
	}
	return out
}

// BlockVisible reports whether p may see block b in status st: an
// operator (no tenant) sees every block; a tenant sees a block it already
// holds, or one with room for another tenant's composition.
func BlockVisible(p tenancy.Principal, b *inventory.Block, st compose.BlockStatus) bool {
	if p.Tenant == "" {
		return true
	}
	n := 0
	for _, t := range st.Tenants {
		if t == p.Tenant {
			return true
		}
		n++
	}
	return n < max(b.MaxCompositions, 1)
}
