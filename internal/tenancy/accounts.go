package tenancy

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"rackpool/internal/inventory"
	"rackpool/internal/store"
)

// Accounts, tenants and the lockout policy. Every change is one store plan,
// committed before it takes effect; a failed commit changes nothing.

// Accounts returns copies of the accounts, by user name.
func (s *Service) Accounts() []Account {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Account, 0, len(s.accounts))
	for _, a := range s.accounts {
		out = append(out, *a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].UserName < out[j].UserName })
	return out
}

// Account returns a copy of one account.
func (s *Service) Account(user string) (Account, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.accounts[user]
	if !ok {
		return Account{}, false
	}
	return *a, true
}

// Locked reports whether user is locked out now for at least one source
// address (the others may still log in).
func (s *Service) Locked(user string) bool {
	now := s.clk.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, f := range s.failures {
		if k.user == user && now.Before(f.lockedUntil) {
			return true
		}
	}
	return false
}

// Unlock ends user's lockout from every source address and forgets its
// failed logins (PATCH Locked false, by an administrator).
func (s *Service) Unlock(user string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.accounts[user]; !ok {
		return &NotFoundError{Kind: kindAccount, ID: user}
	}
	s.forgetFailuresLocked(user)
	return nil
}

// forgetFailures drops user's failure counts (a reset password unlocks).
// s.mu must be held.
func (s *Service) forgetFailuresLocked(user string) {
	for k := range s.failures {
		if k.user == user {
			delete(s.failures, k)
		}
	}
	delete(s.spread, user)
}

// checkAccountLocked validates role, tenant and host. s.mu must be held.
func (s *Service) checkAccountLocked(role, tenant, host string) error {
	if _, ok := roles[role]; !ok {
		return &InvalidError{Property: "RoleId", Value: role, Hint: "Use Administrator, Operator, ReadOnly or HostAgent."}
	}
	switch {
	case role == RoleHostAgent && host == "":
		return &InvalidError{Property: "Host", Value: "", Hint: "A HostAgent account acts for one host: give Oem.Rackpool.Host."}
	case role == RoleHostAgent && tenant != "":
		return &InvalidError{Property: "Tenant", Value: tenant, Hint: "A HostAgent account belongs to no tenant."}
	case role != RoleHostAgent && host != "":
		return &InvalidError{Property: "Host", Value: host, Hint: "Only HostAgent accounts are bound to a host."}
	}
	if tenant != "" {
		if role == RoleAdministrator {
			return &InvalidError{Property: "Tenant", Value: tenant, Hint: "Administrators belong to no tenant; use the Operator or ReadOnly role for tenant accounts."}
		}
		if s.tenants[tenant] == nil {
			return &InvalidError{Property: "Tenant", Value: tenant, Hint: "Create the tenant first."}
		}
	}
	return nil
}

// NewAccount describes an account to create.
type NewAccount struct {
	UserName, Password, Role, Tenant string
	// Host binds a RoleHostAgent account to its host (the caller checks
	// that the topology has it).
	Host    string
	Enabled bool
}

// CreateAccount adds an account. Joining a tenant writes the tenant's
// record in the same plan (its version moves on), so a tenant deleted
// meanwhile by another replica fails the creation, and a deletion decided
// on a membership read before it fails too: no account is ever left in a
// tenant that does not exist.
func (s *Service) CreateAccount(ctx context.Context, n NewAccount) (Account, error) {
	if !namePattern.MatchString(n.UserName) {
		return Account{}, &InvalidError{Property: "UserName", Value: n.UserName, Hint: "Use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit."}
	}
	if err := checkPassword(n.Password); err != nil {
		return Account{}, err
	}
	hash := HashPassword(n.Password)
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.mu.Lock()
	_, exists := s.accounts[n.UserName]
	err := s.checkAccountLocked(n.Role, n.Tenant, n.Host)
	var p store.Plan
	joined := s.joinLocked(&p, n.Tenant)
	s.mu.Unlock()
	if exists {
		return Account{}, &ExistsError{Kind: kindAccount, ID: n.UserName}
	}
	if err != nil {
		return Account{}, err
	}
	a := &Account{UserName: n.UserName, Role: n.Role, Tenant: n.Tenant, Host: n.Host, Enabled: n.Enabled, Hash: hash, Version: 1}
	p.Objects = append(p.Objects, accountChange(a))
	if err := s.commit(ctx, p); err != nil {
		return Account{}, err
	}
	s.mu.Lock()
	s.accounts[a.UserName] = a
	if joined != nil {
		s.tenants[joined.ID] = joined
	}
	s.mu.Unlock()
	return *a, nil
}

// joinLocked adds to p the write of tenant's record at its next version,
// for an account joining it, and returns the record as written (nil for no
// tenant). s.mu must be held and the tenant must exist.
func (s *Service) joinLocked(p *store.Plan, tenant string) *Tenant {
	t := s.tenants[tenant]
	if tenant == "" || t == nil {
		return nil
	}
	next := t.clone()
	next.Version++
	p.Objects = append(p.Objects, tenantChange(&next))
	return &next
}

// tenantRefsLocked returns the Check entry for tenant's record (none for
// no tenant). s.mu must be held.
func (s *Service) tenantRefsLocked(tenant string) []store.ObjectRef {
	if tenant == "" {
		return nil
	}
	var v int64
	if t := s.tenants[tenant]; t != nil {
		v = t.Version
	}
	return []store.ObjectRef{{Kind: kindTenant, ID: tenant, Version: v}}
}

// AccountChange is a change to an account; nil fields stay as they are.
// A non-zero Version must be the account's current version (an If-Match).
type AccountChange struct {
	Version  int64
	Password *string
	Role     *string
	Tenant   *string
	Enabled  *bool
}

// VersionError: a change named a version the record no longer has.
type VersionError struct {
	Kind, ID      string
	Want, Current int64
}

func (e *VersionError) Error() string {
	return fmt.Sprintf("%s %q is at version %d, not %d", e.Kind, e.ID, e.Current, e.Want)
}

// UpdateAccount changes an account. Changing the role, tenant or password,
// or disabling it, ends the account's sessions in the same commit.
func (s *Service) UpdateAccount(ctx context.Context, user string, ch AccountChange) (Account, error) {
	var hash string
	if ch.Password != nil {
		if err := checkPassword(*ch.Password); err != nil {
			return Account{}, err
		}
		hash = HashPassword(*ch.Password)
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.mu.Lock()
	cur, ok := s.accounts[user]
	if !ok {
		s.mu.Unlock()
		return Account{}, &NotFoundError{Kind: kindAccount, ID: user}
	}
	if ch.Version != 0 && ch.Version != cur.Version {
		s.mu.Unlock()
		return Account{}, &VersionError{Kind: kindAccount, ID: user, Want: ch.Version, Current: cur.Version}
	}
	next := *cur
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
		s.mu.Unlock()
		return Account{}, &InvalidError{Property: "RoleId", Value: next.Role, Hint: "The built-in Administrator keeps its role, has no tenant and cannot be disabled."}
	}
	if err := s.checkAccountLocked(next.Role, next.Tenant, next.Host); err != nil {
		s.mu.Unlock()
		return Account{}, err
	}
	p := store.Plan{Objects: []store.ObjectChange{accountChange(&next)}}
	var joined *Tenant
	if next.Tenant != cur.Tenant {
		joined = s.joinLocked(&p, next.Tenant)
	}
	s.mu.Unlock()
	endSessions := next.Role != cur.Role || next.Tenant != cur.Tenant || next.Enabled != cur.Enabled || next.Hash != cur.Hash
	if endSessions {
		p.Objects = append(p.Objects, s.sessionDeletions(user)...)
	}
	if err := s.commit(ctx, p); err != nil {
		return Account{}, err
	}
	s.mu.Lock()
	s.accounts[user] = &next
	if joined != nil {
		s.tenants[joined.ID] = joined
	}
	if endSessions {
		s.dropSessionsOfLocked(user)
	}
	if hash != "" {
		s.forgetFailuresLocked(user) // a reset password unlocks
	}
	s.mu.Unlock()
	return next, nil
}

// DeleteAccount removes an account and its sessions in one commit.
func (s *Service) DeleteAccount(ctx context.Context, user string) error {
	if user == AdminUser {
		return ErrBuiltIn
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.mu.Lock()
	cur, ok := s.accounts[user]
	s.mu.Unlock()
	if !ok {
		return &NotFoundError{Kind: kindAccount, ID: user}
	}
	p := store.Plan{Objects: append([]store.ObjectChange{del(kindAccount, user, cur.Version)}, s.sessionDeletions(user)...)}
	if err := s.commit(ctx, p); err != nil {
		return err
	}
	s.mu.Lock()
	delete(s.accounts, user)
	s.dropSessionsOfLocked(user)
	s.forgetFailuresLocked(user)
	s.mu.Unlock()
	return nil
}

// Tenants returns copies of the tenants, by ID.
func (s *Service) Tenants() []Tenant {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Tenant, 0, len(s.tenants))
	for _, t := range s.tenants {
		out = append(out, t.clone())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Tenant returns a copy of one tenant.
func (s *Service) Tenant(id string) (Tenant, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tenants[id]
	if !ok {
		return Tenant{}, false
	}
	return t.clone(), true
}

// Validate checks a tenant's ID and quotas.
func (t Tenant) Validate() error {
	if !namePattern.MatchString(t.ID) {
		return &InvalidError{Property: "Id", Value: t.ID, Hint: "Use 1-64 letters, digits, '.', '_' or '-'."}
	}
	for k, n := range t.Quotas {
		if k != string(inventory.Compute) && !slices.Contains(inventory.DeviceKinds, inventory.Kind(k)) {
			return &InvalidError{Property: "Quotas", Value: k, Hint: "Use block kinds: " + strings.Join(kindNames(), ", ") + "."}
		}
		if n < 0 {
			return &InvalidError{Property: "Quotas." + k, Value: fmt.Sprint(n), Hint: "Use 0 or more."}
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

// CreateTenant adds a tenant; one with its ID existing already is an
// ExistsError.
func (s *Service) CreateTenant(ctx context.Context, t Tenant) (Tenant, error) {
	return s.putTenant(ctx, t, true)
}

// PutTenant creates a tenant or replaces the description and quotas of an
// existing one. A non-zero t.Version must be the tenant's current version.
func (s *Service) PutTenant(ctx context.Context, t Tenant) (Tenant, error) {
	return s.putTenant(ctx, t, false)
}

func (s *Service) putTenant(ctx context.Context, t Tenant, create bool) (Tenant, error) {
	if err := t.Validate(); err != nil {
		return Tenant{}, err
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.mu.Lock()
	cur := s.tenants[t.ID]
	s.mu.Unlock()
	next := t.clone()
	switch {
	case cur != nil && create:
		return Tenant{}, &ExistsError{Kind: kindTenant, ID: t.ID}
	case cur != nil && t.Version != 0 && t.Version != cur.Version:
		return Tenant{}, &VersionError{Kind: kindTenant, ID: t.ID, Want: t.Version, Current: cur.Version}
	case cur != nil:
		next.Version = cur.Version + 1
	default:
		next.Version = 1
	}
	if err := s.commit(ctx, store.Plan{Objects: []store.ObjectChange{tenantChange(&next)}}); err != nil {
		return Tenant{}, err
	}
	s.mu.Lock()
	s.tenants[t.ID] = &next
	s.mu.Unlock()
	return next.clone(), nil
}

// DeleteTenant removes a tenant that no account belongs to. The caller
// checks what else the tenant holds (compositions, reservations) first.
func (s *Service) DeleteTenant(ctx context.Context, id string) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.mu.Lock()
	cur, ok := s.tenants[id]
	var member string
	for _, a := range s.accounts {
		if a.Tenant == id && (member == "" || a.UserName < member) {
			member = a.UserName
		}
	}
	s.mu.Unlock()
	if !ok {
		return &NotFoundError{Kind: kindTenant, ID: id}
	}
	if member != "" {
		return &InUseError{Kind: kindTenant, ID: id, Hint: "Move or delete account " + member + " first."}
	}
	if err := s.commit(ctx, store.Plan{Objects: []store.ObjectChange{del(kindTenant, id, cur.Version)}}); err != nil {
		return err
	}
	s.mu.Lock()
	delete(s.tenants, id)
	s.mu.Unlock()
	return nil
}

// Quota returns tenant's limits by block kind (nil: unlimited) and the
// tenant record they were read from, for the Check list of the plan that
// takes blocks under them (see the package comment). No tenant has no
// quota and no ref.
func (s *Service) Quota(tenant string) (map[inventory.Kind]int, []store.ObjectRef) {
	if tenant == "" {
		return nil, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	refs := s.tenantRefsLocked(tenant)
	t := s.tenants[tenant]
	if t == nil || len(t.Quotas) == 0 {
		return nil, refs
	}
	q := make(map[inventory.Kind]int, len(t.Quotas))
	for k, n := range t.Quotas {
		q[inventory.Kind(k)] = n
	}
	return q, refs
}

// Lockout returns the lockout policy.
func (s *Service) Lockout() LockoutPolicy {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lockout
}

// SetLockout replaces the lockout policy.
func (s *Service) SetLockout(ctx context.Context, p LockoutPolicy) error {
	if p.Threshold < 0 || p.Duration < 0 || p.ResetAfter < 0 || p.Duration > 24*time.Hour || p.ResetAfter > 24*time.Hour {
		return &InvalidError{Property: "AccountLockoutThreshold", Value: fmt.Sprint(p.Threshold), Hint: "Use non-negative values; durations up to 86400 seconds."}
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.mu.Lock()
	v := s.lockoutVer + 1
	s.mu.Unlock()
	if err := s.commit(ctx, store.Plan{Objects: []store.ObjectChange{put(kindPolicy, lockoutID, v, p)}}); err != nil {
		return err
	}
	s.mu.Lock()
	s.lockout, s.lockoutVer = p, v
	s.mu.Unlock()
	return nil
}
