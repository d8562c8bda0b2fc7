package composition

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"rackpool/internal/compose"
	"rackpool/internal/fabric"
	"rackpool/internal/inventory"
	"rackpool/internal/metrics"
	"rackpool/internal/redfish/service"
	"rackpool/internal/rf"
	"rackpool/internal/store"
	"rackpool/internal/tenancy"
	"rackpool/internal/topology"
)

// Routes are the routes of Systems, their inventory, power, the CompositionService, the
// Compose action, the reservations and the allocation's export and import;
// the core's routes.go gathers them.
var Routes = slices.Concat(systemRoutes, inventoryRoutes, powerRoutes, blockRoutes, composeRoutes, reservationRoutes, allocationRoutes)

// Compositions is what the family needs of the composition manager
// (compose.Manager): each file declares its part.
type Compositions interface {
	composer          // systems.go
	powerController   // power.go
	reserver          // compose_action.go
	compositionPolicy // compose_action.go
}

// Tenants are the tenants as the family reads and writes them
// (tenancy.Service): a composition is held to its tenant's quota, and an
// import creates the tenants its document names.
type Tenants interface {
	Quota(tenant string) (map[inventory.Kind]int, []store.ObjectRef)
	Tenants() []tenancy.Tenant
	PutTenant(ctx context.Context, t tenancy.Tenant) (tenancy.Tenant, error)
	DeleteTenant(ctx context.Context, id string) error
}

// Core is what the family takes from the service's core (package redfish).
type Core interface {
	service.Hider
	// Async runs fn now or, when estimate exceeds the service's threshold
	// or the client prefers it, as a task: it answers 202 with the task's
	// monitor and runs fn in the background.
	Async(w http.ResponseWriter, r *http.Request, estimate time.Duration, fn func(http.ResponseWriter, *http.Request) error) error
	// InCommit is the context for a workflow that ends in one outcome
	// commit, answered with status when it succeeds: the commit carries
	// r's audit entry (store.PendingAudit).
	InCommit(r *http.Request, status int) context.Context
	// Problem maps err to the Redfish error it is answered with, for a
	// handler to reword; the core renders what a handler returns the same
	// way, its internal detail logged.
	Problem(err error) *rf.Problem
}

// Deps are what a Service serves from.
type Deps struct {
	Topology *topology.Topology
	Mgr      Compositions
	Tenants  Tenants
	Core     Core
	// Health is a device's health as the core reads it (the fabric
	// monitor's cache, or the fabric itself).
	Health func(ctx context.Context, d *inventory.Device) fabric.Health
	// ComposeLatency observes each POST of a system, labelled by outcome
	// (rackpool_compose_duration_seconds).
	ComposeLatency *metrics.HistogramVec
	Logger         *slog.Logger
}

// Service serves the composition family.
type Service struct {
	top        *topology.Topology
	mgr        Compositions
	tenants    Tenants
	core       Core
	health     func(ctx context.Context, d *inventory.Device) fabric.Health
	composeLat *metrics.HistogramVec
	log        *slog.Logger
	zones      sync.Map // *inventory.Device, or a compute *inventory.Block → blockZones (zonesJSON)
}

// New returns a Service over d.
func New(d Deps) *Service {
	return &Service{top: d.Topology, mgr: d.Mgr, tenants: d.Tenants, core: d.Core, health: d.Health,
		composeLat: d.ComposeLatency, log: d.Logger}
}

// decode reads r's body into v strictly (rf.Decode).
func decode(r *http.Request, v any) error { return rf.Decode(r, v, rf.MaxBody) }

func readCloser(b []byte) io.ReadCloser { return io.NopCloser(bytes.NewReader(b)) }

// quotaOf returns the quota of r's tenant and the tenant record it was
// read from, which the composition's plan checks.
func (s *Service) quotaOf(r *http.Request) (compose.Quota, []store.ObjectRef) {
	return s.tenants.Quota(service.Principal(r).Tenant)
}

// systemVisible returns composed system id if r's principal may see it.
func (s *Service) systemVisible(r *http.Request, id string) (*inventory.Composition, error) {
	return service.VisibleSystem(r, s.mgr, s.core, id)
}

// visibleBlock is service.BlockVisible for a block whose status the
// caller has not read.
func (s *Service) visibleBlock(p tenancy.Principal, b *inventory.Block) bool {
	return service.VisibleBlock(p, b, s.mgr)
}

// visibleSystems filters composition IDs to those p may see.
func (s *Service) visibleSystems(p tenancy.Principal, ids []string) []string {
	return service.VisibleSystems(p, s.mgr, ids)
}
