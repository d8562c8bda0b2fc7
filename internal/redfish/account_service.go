package redfish

import (
	"context"
	"net/http"
	"time"

	"rackpool/internal/inventory"
	"rackpool/internal/redfish/service"
	"rackpool/internal/rf"
	"rackpool/internal/store"
	"rackpool/internal/tenancy"
)

// accountStore is what the AccountService's handlers need of the
// accounts (tenancy.Service).
type accountStore interface {
	Accounts() []tenancy.Account
	Account(user string) (tenancy.Account, bool)
	CreateAccount(ctx context.Context, n tenancy.NewAccount) (tenancy.Account, error)
	UpdateAccount(ctx context.Context, user string, ch tenancy.AccountChange) (tenancy.Account, error)
	DeleteAccount(ctx context.Context, user string) error
	Locked(user string) bool
	Unlock(user string) error
	Lockout() tenancy.LockoutPolicy
	SetLockout(ctx context.Context, p tenancy.LockoutPolicy) error
	Tenants() []tenancy.Tenant
	Tenant(id string) (tenancy.Tenant, bool)
	CreateTenant(ctx context.Context, t tenancy.Tenant) (tenancy.Tenant, error)
	PutTenant(ctx context.Context, t tenancy.Tenant) (tenancy.Tenant, error)
	DeleteTenant(ctx context.Context, id string) error
	Quota(tenant string) (map[inventory.Kind]int, []store.ObjectRef)
}

// usageCounter counts the blocks a tenant holds (compose.Manager).
type usageCounter interface {
	Usage(tenant string) map[inventory.Kind]int
}

// accountRoutes are the routes of the AccountService: accounts, roles, tenants (routes.go).
var accountRoutes = []route{
	{"GET /redfish/v1/AccountService", login, (*Server).getAccountService},
	{"PATCH /redfish/v1/AccountService", configureUsers, (*Server).patchAccountService},
	{"GET /redfish/v1/AccountService/Accounts", login, (*Server).getAccounts},
	{"POST /redfish/v1/AccountService/Accounts", configureUsers, (*Server).postAccount},
	{"GET /redfish/v1/AccountService/Accounts/{id}", login, (*Server).getAccount},
	{"PATCH /redfish/v1/AccountService/Accounts/{id}", configureSelf, (*Server).patchAccount},
	{"DELETE /redfish/v1/AccountService/Accounts/{id}", configureUsers, (*Server).deleteAccount},
	{"GET /redfish/v1/AccountService/Roles", login, (*Server).getRoles},
	{"GET /redfish/v1/AccountService/Roles/{id}", login, (*Server).getRole},
	{"GET /redfish/v1/AccountService/Oem/Rackpool/Tenants", login, (*Server).getTenants},
	{"POST /redfish/v1/AccountService/Oem/Rackpool/Tenants", configureUsers, (*Server).postTenant},
	{"GET /redfish/v1/AccountService/Oem/Rackpool/Tenants/{id}", login, (*Server).getTenant},
	{"PATCH /redfish/v1/AccountService/Oem/Rackpool/Tenants/{id}", configureUsers, (*Server).patchTenant},
	{"DELETE /redfish/v1/AccountService/Oem/Rackpool/Tenants/{id}", configureUsers, (*Server).deleteTenant},
}

// AccountService: accounts with the three standard roles, tenants (an OEM
// property of accounts, and an OEM collection with quotas), the lockout
// policy. Administrators (ConfigureUsers) manage everything; any account
// may read itself and change its own password (ConfigureSelf).

const accountsPath = "/redfish/v1/AccountService/Accounts/"
const tenantsPath = "/redfish/v1/AccountService/Oem/Rackpool/Tenants"

func (s *Server) getAccountService(w http.ResponseWriter, r *http.Request) error {
	lp := s.auth.Lockout()
	writeJSON(w, http.StatusOK, map[string]any{
		"@odata.id":                         "/redfish/v1/AccountService",
		"@odata.type":                       "#AccountService.v1_15_0.AccountService",
		"Id":                                "AccountService",
		"Name":                              "Account Service",
		"Status":                            map[string]string{"State": "Enabled", "Health": "OK"},
		"ServiceEnabled":                    true,
		"MinPasswordLength":                 tenancy.MinPasswordLength,
		"MaxPasswordLength":                 tenancy.MaxPasswordLength,
		"AccountLockoutThreshold":           lp.Threshold,
		"AccountLockoutDuration":            int(lp.Duration.Seconds()),
		"AccountLockoutCounterResetAfter":   int(lp.ResetAfter.Seconds()),
		"AccountLockoutCounterResetEnabled": true,
		"LocalAccountAuth":                  "Enabled",
		"Accounts":                          ref("/redfish/v1/AccountService/Accounts"),
		"Roles":                             ref("/redfish/v1/AccountService/Roles"),
		"Oem":                               rackpoolOem("AccountService", map[string]any{"Tenants": ref(tenantsPath), "PasswordHashing": "Argon2id"}),
	})
	return nil
}

func (s *Server) patchAccountService(w http.ResponseWriter, r *http.Request) error {
	var body struct {
		AccountLockoutThreshold         *int
		AccountLockoutDuration          *int
		AccountLockoutCounterResetAfter *int
	}
	if err := decode(r, &body); err != nil {
		return err
	}
	lp := s.auth.Lockout()
	if body.AccountLockoutThreshold != nil {
		lp.Threshold = *body.AccountLockoutThreshold
	}
	if body.AccountLockoutDuration != nil {
		lp.Duration = time.Duration(*body.AccountLockoutDuration) * time.Second
	}
	if body.AccountLockoutCounterResetAfter != nil {
		lp.ResetAfter = time.Duration(*body.AccountLockoutCounterResetAfter) * time.Second
	}
	if err := s.auth.SetLockout(r.Context(), lp); err != nil {
		return err
	}
	return s.getAccountService(w, r)
}

func (s *Server) getAccounts(w http.ResponseWriter, r *http.Request) error {
	p := principal(r)
	var members []odataID
	for _, a := range s.auth.Accounts() {
		if p.Has(tenancy.ConfigureUsers) || a.UserName == p.User {
			members = append(members, ref(accountsPath+a.UserName))
		}
	}
	body := collection("/redfish/v1/AccountService/Accounts", "ManagerAccountCollection", "Accounts", members)
	writeJSON(w, http.StatusOK, body)
	return nil
}

func (s *Server) accountBody(a tenancy.Account) map[string]any {
	oem := map[string]any{}
	if a.Tenant != "" {
		oem["Tenant"] = a.Tenant
	}
	if a.Host != "" {
		oem["Host"] = a.Host
	}
	return map[string]any{
		"@odata.id":    accountsPath + a.UserName,
		"@odata.type":  "#ManagerAccount.v1_12_0.ManagerAccount",
		"@odata.etag":  service.ETag(a.Version),
		"Id":           a.UserName,
		"Name":         "User Account",
		"UserName":     a.UserName,
		"RoleId":       a.Role,
		"Enabled":      a.Enabled,
		"Locked":       s.auth.Locked(a.UserName),
		"Password":     nil,
		"AccountTypes": []string{"Redfish"},
		"Links":        map[string]any{"Role": ref("/redfish/v1/AccountService/Roles/" + a.Role)},
		"Oem":          rackpoolOem("ManagerAccount", oem),
	}
}

// visibleAccount returns the account id if r's principal may see it:
// administrators see all, others only themselves (404 otherwise, so
// account names do not leak).
func (s *Server) visibleAccount(r *http.Request, id string) (tenancy.Account, error) {
	p := principal(r)
	a, ok := s.auth.Account(id)
	if !ok {
		return tenancy.Account{}, errNotFound("ManagerAccount", id)
	}
	if !p.Has(tenancy.ConfigureUsers) && p.User != id {
		return tenancy.Account{}, s.hide(r, "ManagerAccount", id)
	}
	return a, nil
}

func (s *Server) getAccount(w http.ResponseWriter, r *http.Request) error {
	a, err := s.visibleAccount(r, r.PathValue("id"))
	if err != nil {
		return err
	}
	w.Header().Set("ETag", service.ETag(a.Version))
	writeJSON(w, http.StatusOK, s.accountBody(a))
	return nil
}

type accountOem struct {
	Rackpool *struct {
		Tenant *string
		Host   *string // HostAgent accounts: the host they act for
	}
}

func (s *Server) postAccount(w http.ResponseWriter, r *http.Request) error {
	var body struct {
		UserName     *string
		Password     *string
		RoleId       *string
		Enabled      *bool
		AccountTypes []string
		Oem          *accountOem
	}
	if err := decode(r, &body); err != nil {
		return err
	}
	switch {
	case body.UserName == nil:
		return errPropertyMissing("UserName")
	case body.Password == nil:
		return errPropertyMissing("Password")
	case body.RoleId == nil:
		return errPropertyMissing("RoleId")
	}
	enabled := true
	if body.Enabled != nil {
		enabled = *body.Enabled
	}
	tenant, host := "", ""
	if body.Oem != nil && body.Oem.Rackpool != nil && body.Oem.Rackpool.Tenant != nil {
		tenant = *body.Oem.Rackpool.Tenant
	}
	if body.Oem != nil && body.Oem.Rackpool != nil && body.Oem.Rackpool.Host != nil {
		host = *body.Oem.Rackpool.Host
		if s.top.Host(host) == nil {
			return errPropertyValue("Oem/Rackpool/Host", host, "Name a host of the topology (rackpool show).")
		}
	}
	a, err := s.auth.CreateAccount(r.Context(), tenancy.NewAccount{UserName: *body.UserName, Password: *body.Password, Role: *body.RoleId,
		Tenant: tenant, Host: host, Enabled: enabled})
	if err != nil {
		return err
	}
	w.Header().Set("Location", accountsPath+a.UserName)
	writeJSON(w, http.StatusCreated, s.accountBody(a))
	return nil
}

func (s *Server) patchAccount(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if _, err := s.visibleAccount(r, id); err != nil {
		return err
	}
	var body struct {
		Password *string
		RoleId   *string
		Enabled  *bool
		Locked   *bool
		UserName *string
		Oem      *accountOem
	}
	if err := decode(r, &body); err != nil {
		return err
	}
	if body.Locked != nil && *body.Locked {
		return errPropertyValue("Locked", "true", "Only failed logins lock an account; set Enabled false to stop it logging in.")
	}
	ch := tenancy.AccountChange{Password: body.Password, Role: body.RoleId, Enabled: body.Enabled}
	if body.Oem != nil && body.Oem.Rackpool != nil {
		ch.Tenant = body.Oem.Rackpool.Tenant
		if body.Oem.Rackpool.Host != nil {
			return errPropertyValue("Oem/Rackpool/Host", *body.Oem.Rackpool.Host, "A host agent's host is fixed; create another account.")
		}
	}
	if body.UserName != nil && *body.UserName != id {
		return fromProblem(rf.PropertyNotWritable("UserName").Resolve("Accounts cannot be renamed: create an account with the new name, then delete this one."))
	}
	if !principal(r).Has(tenancy.ConfigureUsers) && (ch.Role != nil || ch.Enabled != nil || ch.Tenant != nil || body.Locked != nil) {
		return errPrivilege().withResolution("Only administrators change roles, tenants, enablement or the lockout; you may change your own Password.")
	}
	if ch == (tenancy.AccountChange{}) && body.Locked == nil {
		return errPropertyMissing("Password")
	}
	if body.Locked != nil {
		// Locked false: the lockout ends for every source address.
		if err := s.auth.Unlock(id); err != nil {
			return err
		}
		noteAudit(r).detail = "unlocked " + id
	}
	a, ok := s.auth.Account(id)
	if ch != (tenancy.AccountChange{}) {
		var err error
		if a, err = s.auth.UpdateAccount(r.Context(), id, ch); err != nil {
			return err
		}
	} else if !ok {
		return errNotFound("ManagerAccount", id)
	}
	w.Header().Set("ETag", service.ETag(a.Version))
	writeJSON(w, http.StatusOK, s.accountBody(a))
	return nil
}

func (s *Server) deleteAccount(w http.ResponseWriter, r *http.Request) error {
	if err := s.auth.DeleteAccount(r.Context(), r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) getRoles(w http.ResponseWriter, r *http.Request) error {
	var members []odataID
	for _, id := range tenancy.Roles() {
		members = append(members, ref("/redfish/v1/AccountService/Roles/"+id))
	}
	writeJSON(w, http.StatusOK, collection("/redfish/v1/AccountService/Roles", "RoleCollection", "Roles", members))
	return nil
}

func (s *Server) getRole(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	privs, ok := tenancy.Privileges(id)
	if !ok {
		return errNotFound("Role", id)
	}
	assigned, oemPrivs := []string{}, []string{}
	for _, p := range privs {
		if p == tenancy.HostAgent {
			oemPrivs = append(oemPrivs, p)
		} else {
			assigned = append(assigned, p)
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"@odata.id":          "/redfish/v1/AccountService/Roles/" + id,
		"@odata.type":        "#Role.v1_3_0.Role",
		"Id":                 id,
		"Name":               id + " Role",
		"RoleId":             id,
		"IsPredefined":       true,
		"AssignedPrivileges": assigned,
		"OemPrivileges":      oemPrivs,
	})
	return nil
}

// Tenants (OEM): a tenant's accounts see only their tenant.

func (s *Server) tenantBody(t tenancy.Tenant) map[string]any {
	usage := map[string]int{}
	for k, n := range s.mgr.Usage(t.ID) {
		usage[string(k)] = n
	}
	quotas := t.Quotas
	if quotas == nil {
		quotas = map[string]int{}
	}
	return map[string]any{
		"@odata.id":   tenantsPath + "/" + t.ID,
		"@odata.type": "#RackpoolTenant.v1_0_0.RackpoolTenant",
		"Id":          t.ID,
		"Name":        "Tenant " + t.ID,
		"Description": t.Description,
		"Quotas":      quotas,
		"Usage":       usage,
	}
}

func (s *Server) getTenants(w http.ResponseWriter, r *http.Request) error {
	p := principal(r)
	members := []odataID{}
	for _, t := range s.auth.Tenants() {
		if p.Has(tenancy.ConfigureUsers) || p.Tenant == t.ID {
			members = append(members, ref(tenantsPath+"/"+t.ID))
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"@odata.id": tenantsPath, "@odata.type": "#RackpoolTenantCollection.RackpoolTenantCollection", "Name": "Tenants", "Members": members, "Members@odata.count": len(members),
	})
	return nil
}

func (s *Server) visibleTenant(r *http.Request, id string) (tenancy.Tenant, error) {
	p := principal(r)
	t, ok := s.auth.Tenant(id)
	if !ok {
		return tenancy.Tenant{}, errNotFound("Tenant", id)
	}
	if !p.Has(tenancy.ConfigureUsers) && p.Tenant != id {
		return tenancy.Tenant{}, s.hide(r, "Tenant", id)
	}
	return t, nil
}

func (s *Server) getTenant(w http.ResponseWriter, r *http.Request) error {
	t, err := s.visibleTenant(r, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.tenantBody(t))
	return nil
}

func (s *Server) postTenant(w http.ResponseWriter, r *http.Request) error {
	var body struct {
		Id          *string
		Description string
		Quotas      map[string]int
	}
	if err := decode(r, &body); err != nil {
		return err
	}
	if body.Id == nil {
		return errPropertyMissing("Id")
	}
	t, err := s.auth.CreateTenant(r.Context(), tenancy.Tenant{ID: *body.Id, Description: body.Description, Quotas: body.Quotas})
	if err != nil {
		return err
	}
	w.Header().Set("Location", tenantsPath+"/"+t.ID)
	writeJSON(w, http.StatusCreated, s.tenantBody(t))
	return nil
}

func (s *Server) patchTenant(w http.ResponseWriter, r *http.Request) error {
	t, err := s.visibleTenant(r, r.PathValue("id"))
	if err != nil {
		return err
	}
	var body struct {
		Description *string
		Quotas      map[string]int
	}
	if err := decode(r, &body); err != nil {
		return err
	}
	if body.Description != nil {
		t.Description = *body.Description
	}
	if body.Quotas != nil {
		t.Quotas = body.Quotas
	}
	t, err = s.auth.PutTenant(r.Context(), t)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.tenantBody(t))
	return nil
}

func (s *Server) deleteTenant(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	for _, c := range append(s.mgr.List(), s.mgr.Reservations()...) {
		if c.Tenant == id {
			return newError(http.StatusConflict, baseRegistry+"ResourceInUse",
				"The change to the requested resource failed because the resource is in use or in transition.").
				withResolution("Decompose the tenant's systems and release its reservations first (" + c.ID + ").")
		}
	}
	if err := s.auth.DeleteTenant(r.Context(), id); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
