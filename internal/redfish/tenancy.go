package redfish

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"rackpool/internal/rf"
	"rackpool/internal/tenancy"

	"rackpool/internal/store"
)

// Tenancy: accounts without a tenant (administrators, unscoped operators)
// see everything. A tenant's accounts see the free pool and what their
// tenant holds: its composed systems and reservations, the blocks in them,
// the physical hosts those run on, and shareable blocks that still have
// room. Anything else answers 404 exactly as if it did not exist, so a
// tenant learns nothing about another's allocations.

// hide refuses r a resource that exists but belongs to another tenant: the
// answer is the same 404 as for a resource that does not exist, and the
// attempt is audited as denied (a mutation is audited by serve; a read is
// audited here, since reads are otherwise not).
func (s *Server) hide(r *http.Request, kind, id string) *apiError {
	p := principal(r)
	note := "hidden from tenant " + p.Tenant + ": " + kind + " " + id
	e := errNotFound(kind, id)
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		s.audit(r.Context(), store.AuditEntry{User: p.User, Tenant: p.Tenant, Remote: r.RemoteAddr, Method: r.Method,
			Target: r.URL.Path, Action: r.Pattern, Outcome: store.AuditDenied, Status: http.StatusNotFound, Detail: note,
			MessageID: e.id})
	} else {
		noteAudit(r).detail = note
	}
	s.log.Warn("cross-tenant access refused", "user", p.User, "tenant", p.Tenant, "kind", kind, "id", id, "method", r.Method)
	return e
}

// core is what the families take from s: its tenant hiding
// (service.Hider), and the composition family's tasks, audit-in-commit and
// mapping of errors (composition.Core).
type core struct{ s *Server }

func (c core) Hide(r *http.Request, kind, id string) error { return c.s.hide(r, kind, id) }

func (c core) Async(w http.ResponseWriter, r *http.Request, estimate time.Duration, fn func(http.ResponseWriter, *http.Request) error) error {
	return c.s.maybeAsync(w, r, estimate, fn)
}

func (c core) InCommit(r *http.Request, status int) context.Context {
	return c.s.auditInCommit(r, status)
}

func (c core) Problem(err error) *rf.Problem { return problem(err) }

// redfishKinds names tenancy's record kinds as Redfish resource types.
var redfishKinds = map[string]string{"account": "ManagerAccount", "tenant": "Tenant", "session": "Session"}

// translateTenancy maps tenancy's errors to Redfish errors.
func translateTenancy(err error) (*apiError, bool) {
	var (
		inv *tenancy.InvalidError
		nf  *tenancy.NotFoundError
		ex  *tenancy.ExistsError
		use *tenancy.InUseError
		ver *tenancy.VersionError
	)
	switch {
	case errors.As(err, &inv):
		prop, hint := inv.Property, inv.Hint
		if prop == "Tenant" {
			prop = "Oem.Rackpool.Tenant"
			if hint == "Create the tenant first." {
				hint = "Create the tenant first (POST " + tenantsPath + ")."
			}
		}
		return errPropertyValue(prop, inv.Value, hint), true
	case errors.As(err, &nf):
		return errNotFound(redfishKinds[nf.Kind], nf.ID), true
	case errors.As(err, &ex):
		kind, prop := redfishKinds[ex.Kind], "Id"
		if ex.Kind == "account" {
			prop = "UserName"
		}
		return newError(http.StatusConflict, baseRegistry+"ResourceAlreadyExists",
			fmt.Sprintf("The requested resource of type %s with the property %s with the value '%s' already exists.", kind, prop, ex.ID),
			kind, prop, ex.ID), true
	case errors.As(err, &use):
		return newError(http.StatusConflict, baseRegistry+"ResourceInUse",
			"The change to the requested resource failed because the resource is in use or in transition.").
			withResolution(use.Hint), true
	case errors.As(err, &ver):
		e := newError(http.StatusPreconditionFailed, baseRegistry+"PreconditionFailed",
			"The ETag supplied did not match the ETag required to change this resource.")
		e.resolution = err.Error()
		return e, true
	case errors.Is(err, tenancy.ErrBuiltIn):
		return newError(http.StatusMethodNotAllowed, baseRegistry+"ResourceCannotBeDeleted",
			"The delete request failed because the resource requested cannot be deleted."), true
	case errors.Is(err, tenancy.ErrNoAccount), errors.Is(err, tenancy.ErrLocked):
		return errNoSession(), true
	case errors.Is(err, tenancy.ErrSessionLimit):
		return newError(http.StatusServiceUnavailable, baseRegistry+"SessionLimitExceeded",
			"The session establishment failed due to the number of simultaneous sessions exceeding the limit of the implementation.").
			withResolution("The account holds as many sessions as it may (serve --max-sessions): " + err.Error() + "."), true
	}
	return nil, false
}
