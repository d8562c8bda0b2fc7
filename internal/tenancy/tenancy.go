// Package tenancy owns who may do what in the control plane: accounts with
// the three standard Redfish roles and their privileges, tenants and their
// quotas, sessions, password hashing (Argon2id) and lockout.
//
// # State model
//
// Every account, tenant and session is its own store object with an
// optimistic version (kinds "account", "tenant", "session"; the lockout
// policy is object "lockout" of kind "tenancy"). A change is one store plan
// holding everything it touches: deleting an account deletes its sessions in
// the same commit, and a write expects each record at the version it read,
// so a record another replica changed meanwhile fails the write with
// store.ErrConflict and changes nothing (the cache is then re-read from the
// store, so a retry sees the other change). Nothing is saved as a
// whole-table blob.
//
// A Service keeps every record in memory, loaded at Open, because each
// request is checked against them (its credentials, its session, its
// tenant's quota). Writes go to the store first and reach the cache only
// once committed.
//
// Quotas guard compositions: Quota returns a tenant's limits together with
// a store.ObjectRef of the tenant record at the version they were read
// from. The composition manager puts that ref in the Check list of the plan
// that takes the blocks, so the quota and the composition it allowed commit
// together: a quota lowered in between fails the composition with
// store.ErrConflict instead of letting it through on the old limit.
//
// Sessions are stored by ID with the SHA-256 of their token (never the
// token) and survive a restart. A session's last use is written back
// lazily, at most once per quarter of the idle timeout and as an intent
// (no fsync of its own), so authenticating a request costs no disk write;
// after a crash a session may therefore expire up to a quarter of the idle
// timeout early. Failed-login counters (lockout) are kept in memory by each
// process.
//
// Stores written before this package existed kept accounts, tenants and the
// lockout policy as JSON settings; Open imports them once, in one plan,
// when the store holds no account record yet.
package tenancy

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"time"
)

// AdminUser is the built-in administrator account: it always exists, keeps
// the Administrator role, belongs to no tenant and cannot be disabled or
// deleted.
const AdminUser = "Administrator"

// Roles: the three standard Redfish roles, and the host agent's.
const (
	RoleAdministrator = "Administrator"
	RoleOperator      = "Operator"
	RoleReadOnly      = "ReadOnly"
	// RoleHostAgent is the credential of one host's agent (rackpool agent
	// --host): it takes and answers that host's saga steps and nothing
	// else, not even reads (no Login privilege).
	RoleHostAgent = "HostAgent"
)

// Redfish privileges.
const (
	Login               = "Login"
	ConfigureManager    = "ConfigureManager"
	ConfigureUsers      = "ConfigureUsers"
	ConfigureSelf       = "ConfigureSelf"
	ConfigureComponents = "ConfigureComponents"
	// HostAgent is rackpool's OEM privilege of RoleHostAgent.
	HostAgent = "RackpoolHostAgent"
)

// roles lists each role's privileges.
var roles = map[string][]string{
	RoleAdministrator: {Login, ConfigureManager, ConfigureUsers, ConfigureSelf, ConfigureComponents},
	RoleOperator:      {Login, ConfigureSelf, ConfigureComponents},
	RoleReadOnly:      {Login, ConfigureSelf},
	RoleHostAgent:     {ConfigureSelf, HostAgent},
}

// Roles returns the role IDs, most privileged first.
func Roles() []string {
	return []string{RoleAdministrator, RoleOperator, RoleReadOnly, RoleHostAgent}
}

// Privileges returns the privileges role grants, and false for an unknown
// role.
func Privileges(role string) ([]string, bool) {
	p, ok := roles[role]
	return slices.Clone(p), ok
}

// Principal is the authenticated identity of a request.
type Principal struct {
	User, Role, Tenant string
	Host               string // RoleHostAgent: the one host it acts for
	Session            string // session ID, when authenticated by token
}

// Has reports whether p's role grants the privilege priv.
func (p Principal) Has(priv string) bool { return slices.Contains(roles[p.Role], priv) }

// Sees reports whether p may see what tenant owns: accounts without a
// tenant see everything; a tenant's accounts see only their tenant's.
func (p Principal) Sees(tenant string) bool { return p.Tenant == "" || p.Tenant == tenant }

// Account is one user of the service. Hash is the Argon2id PHC string; it
// never leaves the process except into the store.
type Account struct {
	UserName string
	Role     string
	Tenant   string
	Host     string // RoleHostAgent only: the host it acts for
	Enabled  bool
	Hash     string
	// Version is the account record's store version; its ETag is
	// W/"Version".
	Version int64
}

// Tenant is a group of accounts that see and act only on their own
// compositions and reservations (and the free pool), within quotas. The
// JSON form is the one allocation exports carry.
type Tenant struct {
	ID          string         `json:"id"`
	Description string         `json:"description,omitempty"`
	Quotas      map[string]int `json:"quotas,omitempty"` // block kind -> most blocks held
	// Version is the tenant record's store version (0 before it is stored).
	Version int64 `json:"-"`
}

func (t Tenant) clone() Tenant {
	t.Quotas = cloneQuotas(t.Quotas)
	return t
}

func cloneQuotas(q map[string]int) map[string]int {
	if q == nil {
		return nil
	}
	c := make(map[string]int, len(q))
	for k, v := range q {
		c[k] = v
	}
	return c
}

// LockoutPolicy is the AccountService's lockout: Threshold failed logins
// within ResetAfter lock the account for Duration. Threshold 0 disables
// lockout.
type LockoutPolicy struct {
	Threshold  int           `json:"threshold"`
	Duration   time.Duration `json:"duration"`
	ResetAfter time.Duration `json:"reset_after"`
}

// DefaultLockout: 5 failures in 5 minutes lock an account for 5 minutes.
var DefaultLockout = LockoutPolicy{Threshold: 5, Duration: 5 * time.Minute, ResetAfter: 5 * time.Minute}

// Session is a login: a token (known only to its holder) standing for an
// account until it is deleted or idle longer than the idle timeout.
type Session struct {
	ID       string
	User     string
	Created  time.Time
	LastUsed time.Time
}

var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// Errors. Callers map them to their protocol's errors; none carries a
// secret.
var (
	// ErrNoAccount: wrong user name or password (never says which), or a
	// disabled account.
	ErrNoAccount = errors.New("invalid credentials")
	// ErrLocked: the account is locked out after repeated failures.
	ErrLocked = errors.New("account locked")
	// ErrSessionLimit: the account holds as many sessions as it may
	// (Options.MaxSessions); it must log out of one first.
	ErrSessionLimit = errors.New("the account holds as many sessions as it may")
	// ErrBuiltIn: the built-in Administrator cannot be deleted.
	ErrBuiltIn = errors.New("the built-in Administrator account cannot be deleted")
)

// InvalidError: a property of a request has a value the service refuses.
type InvalidError struct {
	Property, Value string
	Hint            string // how to correct it
}

func (e *InvalidError) Error() string {
	return fmt.Sprintf("invalid %s %q: %s", e.Property, e.Value, e.Hint)
}

// NotFoundError: no record of Kind ("account", "tenant", "session") has ID.
type NotFoundError struct{ Kind, ID string }

func (e *NotFoundError) Error() string { return fmt.Sprintf("%s %q not found", e.Kind, e.ID) }

// ExistsError: a record of Kind with ID exists already.
type ExistsError struct{ Kind, ID string }

func (e *ExistsError) Error() string { return fmt.Sprintf("%s %q already exists", e.Kind, e.ID) }

// InUseError: the record is still referred to; Hint says by what.
type InUseError struct{ Kind, ID, Hint string }

func (e *InUseError) Error() string { return fmt.Sprintf("%s %q is in use: %s", e.Kind, e.ID, e.Hint) }
