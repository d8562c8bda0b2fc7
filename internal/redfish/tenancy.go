package redfish

import (
	"net/http"

	"rackpool/internal/store"

	"rackpool/internal/compose"
	"rackpool/internal/inventory"
)

// Tenancy: accounts without a tenant (administrators, unscoped operators)
// see everything. A tenant's accounts see the free pool and what their
// tenant holds: its composed systems and reservations, the blocks in them,
// the physical hosts those run on, and shareable blocks that still have
// room. Anything else answers 404 exactly as if it did not exist, so a
// tenant learns nothing about another's allocations.

// systemVisible returns composed system id if r's principal may see it.
func (s *Server) systemVisible(r *http.Request, id string) (*inventory.Composition, error) {
	c, err := s.mgr.Get(id)
	if err != nil {
		return nil, err
	}
	if !principal(r).sees(c.Tenant) {
		return nil, s.hide(r, "ComputerSystem", id)
	}
	return c, nil
}

// blockVisible reports whether p may see block id in status st.
func blockVisible(p Principal, b *inventory.Block, st compose.BlockStatus) bool {
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

// visibleBlock is blockVisible for a block whose status the caller has
// not read: unscoped accounts see every block without the status lookup
// (collections of 10,000 blocks stay one pass over the topology).
func (s *Server) visibleBlock(p Principal, b *inventory.Block) bool {
	return p.Tenant == "" || blockVisible(p, b, s.mgr.BlockStatus(b.ID))
}

// visibleSystems filters composition IDs to those p may see.
func (s *Server) visibleSystems(p Principal, ids []string) []string {
	if p.Tenant == "" {
		return ids
	}
	var out []string
	for _, id := range ids {
		if c, err := s.mgr.Get(id); err == nil && p.sees(c.Tenant) {
			out = append(out, id)
		}
	}
	return out
}

// tenantOf is the tenant new compositions of r's principal belong to.
func tenantOf(r *http.Request) string { return principal(r).Tenant }

// hide refuses r a resource that exists but belongs to another tenant: the
// answer is the same 404 as for a resource that does not exist, and the
// attempt is audited as denied (a mutation is audited by wrap; a read is
// audited here, since reads are otherwise not).
func (s *Server) hide(r *http.Request, kind, id string) *apiError {
	p := principal(r)
	note := "hidden from tenant " + p.Tenant + ": " + kind + " " + id
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		s.audit(r.Context(), store.AuditEntry{User: p.User, Tenant: p.Tenant, Remote: r.RemoteAddr, Method: r.Method,
			Target: r.URL.Path, Action: r.Pattern, Outcome: store.AuditDenied, Status: http.StatusNotFound, Detail: note})
	} else {
		noteAudit(r).detail = note
	}
	s.log.Warn("cross-tenant access refused", "user", p.User, "tenant", p.Tenant, "kind", kind, "id", id, "method", r.Method)
	return errNotFound(kind, id)
}
