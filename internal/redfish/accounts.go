package redfish

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"rackpool/internal/compose"
	"rackpool/internal/inventory"
)

// Account and tenant management on Auth. Every change is written to the
// store before it takes effect; a failed write changes nothing.

var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// AccountChange is a change to an account; nil fields stay as they are.
type AccountChange struct {
	Password *string
	Role     *string
	Tenant   *string
	Enabled  *bool
}

// Accounts returns copies of the accounts, by user name.
func (a *Auth) Accounts() []Account {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]Account, 0, len(a.accounts))
	for _, acc := range a.accounts {
		out = append(out, *acc)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].UserName < out[j].UserName })
	return out
}

// Account returns a copy of one account.
func (a *Auth) Account(user string) (Account, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	acc, ok := a.accounts[user]
	if !ok {
		return Account{}, false
	}
	return *acc, true
}

// locked reports whether user is locked out now.
func (a *Auth) locked(user string) bool {
	now := a.clk.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	f := a.failures[user]
	return f != nil && now.Before(f.lockedUntil)
}

// checkAccount validates role and tenant. a.mu must be held.
func (a *Auth) checkAccount(role, tenant string) error {
	if _, ok := roles[role]; !ok {
		return errPropertyValue("RoleId", role, "Use Administrator, Operator or ReadOnly.")
	}
	if tenant != "" {
		if role == RoleAdministrator {
			return errPropertyValue("Oem.Rackpool.Tenant", tenant, "Administrators belong to no tenant; use the Operator or ReadOnly role for tenant accounts.")
		}
		if a.tenants[tenant] == nil {
			return errPropertyValue("Oem.Rackpool.Tenant", tenant, "Create the tenant first (POST /redfish/v1/AccountService/Oem/Rackpool/Tenants).")
		}
	}
	return nil
}

func checkPassword(p string) error {
	if len(p) < MinPasswordLength {
		return errPropertyValue("Password", "(hidden)", fmt.Sprintf("Use at least %d characters.", MinPasswordLength))
	}
	if len(p) > 256 {
		return errPropertyValue("Password", "(hidden)", "Use at most 256 characters.")
	}
	return nil
}

// CreateAccount adds an account.
func (a *Auth) CreateAccount(ctx context.Context, user, password, role, tenant string, enabled bool) (Account, error) {
	if !namePattern.MatchString(user) {
		return Account{}, errPropertyValue("UserName", user, "Use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit.")
	}
	if err := checkPassword(password); err != nil {
		return Account{}, err
	}
	hash := HashPassword(password)
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.accounts[user]; ok {
		return Account{}, newError(409, baseRegistry+"ResourceAlreadyExists",
			fmt.Sprintf("The requested resource of type ManagerAccount with the property UserName with the value '%s' already exists.", user),
			"ManagerAccount", "UserName", user)
	}
	if err := a.checkAccount(role, tenant); err != nil {
		return Account{}, err
	}
	acc := &Account{UserName: user, Role: role, Tenant: tenant, Enabled: enabled, Hash: hash, Version: 1}
	a.accounts[user] = acc
	if err := a.saveLocked(ctx); err != nil {
		delete(a.accounts, user)
		return Account{}, err
	}
	return *acc, nil
}

// UpdateAccount changes an account. Changing the role, tenant or
// password, or disabling it, ends the account's sessions.
func (a *Auth) UpdateAccount(ctx context.Context, user string, ch AccountChange) (Account, error) {
	var hash string
	if ch.Password != nil {
		if err := checkPassword(*ch.Password); err != nil {
			return Account{}, err
		}
		hash = HashPassword(*ch.Password)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	acc, ok := a.accounts[user]
	if !ok {
		return Account{}, errNotFound("ManagerAccount", user)
	}
	next := *acc
	next.Version++
	if ch.Role != nil {
		next.Role = *ch.Role
	}
	if ch.Tenant != nil {
		next.Tenant = *ch.Tenant
	}
	if ch.Enabled != nil {
		next.Enabled = *ch.Enabled
	}
	if hash != "" {
		next.Hash = hash
	}
	if user == AdminUser && (next.Role != RoleAdministrator || next.Tenant != "" || !next.Enabled) {
		return Account{}, errPropertyValue("RoleId", next.Role, "The built-in Administrator keeps its role, has no tenant and cannot be disabled.")
	}
	if err := a.checkAccount(next.Role, next.Tenant); err != nil {
		return Account{}, err
	}
	a.accounts[user] = &next
	if err := a.saveLocked(ctx); err != nil {
		a.accounts[user] = acc
		return Account{}, err
	}
	if next.Role != acc.Role || next.Tenant != acc.Tenant || next.Enabled != acc.Enabled || next.Hash != acc.Hash {
		a.dropSessionsOf(user)
		if hash != "" {
			delete(a.failures, user) // a reset password unlocks
		}
	}
	return next, nil
}

// DeleteAccount removes an account and ends its sessions.
func (a *Auth) DeleteAccount(ctx context.Context, user string) error {
	if user == AdminUser {
		return newError(405, baseRegistry+"ResourceCannotBeDeleted", "The delete request failed because the resource requested cannot be deleted.")
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	acc, ok := a.accounts[user]
	if !ok {
		return errNotFound("ManagerAccount", user)
	}
	delete(a.accounts, user)
	if err := a.saveLocked(ctx); err != nil {
		a.accounts[user] = acc
		return err
	}
	a.dropSessionsOf(user)
	delete(a.failures, user)
	return nil
}

// Tenants returns copies of the tenants, by ID.
func (a *Auth) Tenants() []Tenant {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]Tenant, 0, len(a.tenants))
	for _, t := range a.tenants {
		out = append(out, cloneTenant(t))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

func cloneTenant(t *Tenant) Tenant {
	c := *t
	if t.Quotas != nil {
		c.Quotas = make(map[string]int, len(t.Quotas))
		for k, v := range t.Quotas {
			c.Quotas[k] = v
		}
	}
	return c
}

// TenantByID returns a copy of one tenant.
func (a *Auth) TenantByID(id string) (Tenant, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	t, ok := a.tenants[id]
	if !ok {
		return Tenant{}, false
	}
	return cloneTenant(t), true
}

// checkQuotas validates quota kinds and limits.
func checkQuotas(q map[string]int) error {
	for k, n := range q {
		if k != string(inventory.Compute) && !slices.Contains(inventory.DeviceKinds, inventory.Kind(k)) {
			return errPropertyValue("Quotas", k, "Use block kinds: "+strings.Join(kindNames(), ", ")+".")
		}
		if n < 0 {
			return errPropertyValue("Quotas."+k, fmt.Sprint(n), "Use 0 or more.")
		}
	}
	return nil
}

func kindNames() []string {
	var out []string
	for _, k := range append([]inventory.Kind{inventory.Compute}, inventory.DeviceKinds...) {
		out = append(out, string(k))
	}
	return out
}

// PutTenant creates or replaces a tenant.
func (a *Auth) PutTenant(ctx context.Context, t Tenant) (created bool, err error) {
	if !namePattern.MatchString(t.ID) {
		return false, errPropertyValue("Id", t.ID, "Use 1-64 letters, digits, '.', '_' or '-'.")
	}
	if err := checkQuotas(t.Quotas); err != nil {
		return false, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	old, existed := a.tenants[t.ID]
	c := cloneTenant(&t)
	a.tenants[t.ID] = &c
	if err := a.saveLocked(ctx); err != nil {
		if existed {
			a.tenants[t.ID] = old
		} else {
			delete(a.tenants, t.ID)
		}
		return false, err
	}
	return !existed, nil
}

// DeleteTenant removes a tenant that no account belongs to.
func (a *Auth) DeleteTenant(ctx context.Context, id string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	t, ok := a.tenants[id]
	if !ok {
		return errNotFound("Tenant", id)
	}
	for _, acc := range a.accounts {
		if acc.Tenant == id {
			return newError(409, baseRegistry+"ResourceInUse",
				"The change to the requested resource failed because the resource is in use or in transition.").
				withResolution("Move or delete account " + acc.UserName + " first.")
		}
	}
	delete(a.tenants, id)
	if err := a.saveLocked(ctx); err != nil {
		a.tenants[id] = t
		return err
	}
	return nil
}

// quota returns tenant's quota for the composition manager.
func (a *Auth) quota(tenant string) compose.Quota {
	if tenant == "" {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	t := a.tenants[tenant]
	if t == nil || len(t.Quotas) == 0 {
		return nil
	}
	q := compose.Quota{}
	for k, n := range t.Quotas {
		q[inventory.Kind(k)] = n
	}
	return q
}

// Lockout returns the lockout policy.
func (a *Auth) Lockout() LockoutPolicy {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.lockout
}

// SetLockout replaces the lockout policy.
func (a *Auth) SetLockout(ctx context.Context, p LockoutPolicy) error {
	if p.Threshold < 0 || p.Duration < 0 || p.ResetAfter < 0 || p.Duration > 24*time.Hour || p.ResetAfter > 24*time.Hour {
		return errPropertyValue("AccountLockoutThreshold", fmt.Sprint(p.Threshold), "Use non-negative values; durations up to 86400 seconds.")
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	old := a.lockout
	a.lockout = p
	if err := a.saveLocked(ctx); err != nil {
		a.lockout = old
		return err
	}
	return nil
}
