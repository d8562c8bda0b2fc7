package tenancy

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"rackpool/internal/clock"
	"rackpool/internal/store"
)

// Store object kinds.
const (
	kindAccount = "account"
	kindTenant  = "tenant"
	kindSession = "session"
	kindPolicy  = "tenancy"
	lockoutID   = "lockout"
)

// Options configures a Service.
type Options struct {
	// Clock is the time source (clock.Real{} when nil).
	Clock clock.Clock
	// IdleTimeout ends sessions unused for longer (30 minutes when 0).
	IdleTimeout time.Duration
	// MaxSessions caps the live sessions of one account
	// (DefaultMaxSessions when 0); a login beyond fails with
	// ErrSessionLimit.
	MaxSessions int
	// AdminPassword, when set, becomes the built-in Administrator's
	// password (ending the Administrator's sessions if it changed it).
	// When empty, the stored password stays; with none stored, Open
	// generates one and returns it so the caller can show it once.
	AdminPassword string
	// CatchUp, when set, brings the cache up to date with the database
	// (several replicas: a session opened at another replica). A session
	// token this cache does not know calls it once before it is refused.
	CatchUp func(ctx context.Context) error
}

// Service holds the accounts, tenants, sessions and lockout policy of the
// control plane, cached from their store records.
type Service struct {
	st   store.Store
	clk  clock.Clock
	idle time.Duration

	// wmu serialises writes: each reads the cache, commits a plan, then
	// updates the cache, so the versions it expects are the latest this
	// process knows.
	wmu sync.Mutex

	mu            sync.Mutex
	accounts      map[string]*Account // by user name; the Administrator included
	tenants       map[string]*Tenant
	lockout       LockoutPolicy
	lockoutVer    int64
	sessions      map[[32]byte]*session    // by SHA-256 of the token
	failures      map[failureKey]*failures // per account and source
	spread        map[string]*failures     // per account, from every source
	verified      map[[32]byte]time.Time
	touchInterval time.Duration
	maxSessions   int
	catchUp       func(ctx context.Context) error
}

// failureKey counts an account's failed logins from one source address.
type failureKey struct{ user, source string }

type failures struct {
	count       int
	first       time.Time
	lockedUntil time.Time
}

type session struct {
	Session
	tokenHash [32]byte
	stored    time.Time // LastUsed as last written to the store
}

// Records as stored.
type accountRecord struct {
	Role    string `json:"role"`
	Tenant  string `json:"tenant,omitempty"`
	Host    string `json:"host,omitempty"`
	Enabled bool   `json:"enabled"`
	Hash    string `json:"hash"`
}

type tenantRecord struct {
	Description string         `json:"description,omitempty"`
	Quotas      map[string]int `json:"quotas,omitempty"`
}

type sessionRecord struct {
	User      string    `json:"user"`
	TokenHash string    `json:"token_sha256"`
	Created   time.Time `json:"created"`
	LastUsed  time.Time `json:"last_used"`
}

// DefaultMaxSessions is how many live sessions one account may hold: far
// more than people and tools open, few enough that a client looping on
// logins cannot fill the store.
const DefaultMaxSessions = 64

// Open loads the tenancy records from st (importing a store's legacy
// settings once), makes sure the built-in Administrator has a password and
// drops sessions that expired while the service was down. It returns the
// generated Administrator password when it had to make one.
func Open(ctx context.Context, st store.Store, o Options) (*Service, string, error) {
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = 30 * time.Minute
	}
	if o.MaxSessions <= 0 {
		o.MaxSessions = DefaultMaxSessions
	}
	s := &Service{st: st, clk: o.Clock, idle: o.IdleTimeout, maxSessions: o.MaxSessions, touchInterval: o.IdleTimeout / 4, catchUp: o.CatchUp,
		failures: map[failureKey]*failures{}, spread: map[string]*failures{}, verified: map[[32]byte]time.Time{}}
	if err := s.load(ctx); err != nil {
		return nil, "", err
	}
	if len(s.accounts) == 0 {
		// A conflict: another replica starting beside this one imported
		// them first (the same records, from the same settings).
		if err := importLegacy(ctx, st); err != nil && !errors.Is(err, store.ErrConflict) {
			return nil, "", err
		}
		if err := s.load(ctx); err != nil {
			return nil, "", err
		}
	}
	generated, err := s.setupAdmin(ctx, o.AdminPassword)
	if err != nil {
		return nil, "", err
	}
	if err := s.dropExpired(ctx); err != nil {
		return nil, "", err
	}
	return s, generated, nil
}

// Kinds are the store object kinds of the tenancy records: what a replica
// following another's changes reloads the cache for.
var Kinds = []string{kindAccount, kindTenant, kindSession, kindPolicy}

// Reload replaces the cache with the store's records: another replica
// changed one.
func (s *Service) Reload(ctx context.Context) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return s.load(ctx)
}

// load replaces the cache with the store's records.
func (s *Service) load(ctx context.Context) error {
	accounts := map[string]*Account{}
	objs, err := s.st.Objects(ctx, kindAccount)
	if err != nil {
		return err
	}
	for _, o := range objs {
		var r accountRecord
		if err := json.Unmarshal(o.Data, &r); err != nil {
			return fmt.Errorf("tenancy: account %q: %w", o.ID, err)
		}
		accounts[o.ID] = &Account{UserName: o.ID, Role: r.Role, Tenant: r.Tenant, Host: r.Host, Enabled: r.Enabled, Hash: r.Hash, Version: o.Version}
	}
	tenants := map[string]*Tenant{}
	if objs, err = s.st.Objects(ctx, kindTenant); err != nil {
		return err
	}
	for _, o := range objs {
		var r tenantRecord
		if err := json.Unmarshal(o.Data, &r); err != nil {
			return fmt.Errorf("tenancy: tenant %q: %w", o.ID, err)
		}
		tenants[o.ID] = &Tenant{ID: o.ID, Description: r.Description, Quotas: r.Quotas, Version: o.Version}
	}
	sessions := map[[32]byte]*session{}
	if objs, err = s.st.Objects(ctx, kindSession); err != nil {
		return err
	}
	for _, o := range objs {
		var r sessionRecord
		if err := json.Unmarshal(o.Data, &r); err != nil {
			return fmt.Errorf("tenancy: session %q: %w", o.ID, err)
		}
		var h [32]byte
		if b, err := hexDecode(r.TokenHash); err != nil || len(b) != len(h) {
			return fmt.Errorf("tenancy: session %q: bad token digest", o.ID)
		} else {
			copy(h[:], b)
		}
		sessions[h] = &session{Session: Session{ID: o.ID, User: r.User, Created: r.Created, LastUsed: r.LastUsed}, tokenHash: h, stored: r.LastUsed}
	}
	lockout, lockoutVer := DefaultLockout, int64(0)
	if objs, err = s.st.Objects(ctx, kindPolicy); err != nil {
		return err
	}
	for _, o := range objs {
		if o.ID == lockoutID {
			if err := json.Unmarshal(o.Data, &lockout); err != nil {
				return fmt.Errorf("tenancy: lockout policy: %w", err)
			}
			lockoutVer = o.Version
		}
	}
	s.mu.Lock()
	s.accounts, s.tenants, s.sessions, s.lockout, s.lockoutVer = accounts, tenants, sessions, lockout, lockoutVer
	s.verified = map[[32]byte]time.Time{}
	s.mu.Unlock()
	return nil
}

// commit applies p. A conflict means another writer changed a record this
// process had cached: the cache is re-read so that a retry decides on
// fresh state, and the error (wrapping store.ErrConflict) goes back.
func (s *Service) commit(ctx context.Context, p store.Plan) error {
	err := s.st.Apply(ctx, p)
	if errors.Is(err, store.ErrConflict) {
		if lerr := s.load(ctx); lerr != nil {
			return errors.Join(err, lerr)
		}
		return fmt.Errorf("%w: a tenancy record changed since it was read; re-read and retry", err)
	}
	return err
}

func put(kind, id string, version int64, v any) store.ObjectChange {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // records are plain structs
	}
	return store.ObjectChange{Kind: kind, Object: store.Object{ID: id, Data: b, Version: version}}
}

func del(kind, id string, version int64) store.ObjectChange {
	return store.ObjectChange{Kind: kind, Object: store.Object{ID: id, Version: version}, Delete: true}
}

func accountChange(a *Account) store.ObjectChange {
	return put(kindAccount, a.UserName, a.Version, accountRecord{Role: a.Role, Tenant: a.Tenant, Host: a.Host, Enabled: a.Enabled, Hash: a.Hash})
}

func tenantChange(t *Tenant) store.ObjectChange {
	return put(kindTenant, t.ID, t.Version, tenantRecord{Description: t.Description, Quotas: t.Quotas})
}

// setupAdmin gives the built-in Administrator its password (see
// Options.AdminPassword).
//
// Replicas starting together on one database race to write the account:
// the one that loses re-reads it (commit does) and decides again, so that
// without a password it keeps the account the winner created (the winner
// printed its password), and with one it finds the same password stored
// or stores its own.
func (s *Service) setupAdmin(ctx context.Context, password string) (generated string, err error) {
	for attempt := 1; ; attempt++ {
		generated, err = s.trySetupAdmin(ctx, password)
		if !errors.Is(err, store.ErrConflict) || attempt == maxStartRetries {
			return generated, err
		}
	}
}

// maxStartRetries bounds how often a start-up step that lost a race with
// another replica re-reads and decides again; each loss means another
// replica's write succeeded, so a handful suffices.
const maxStartRetries = 8

// trySetupAdmin is one attempt of setupAdmin.
func (s *Service) trySetupAdmin(ctx context.Context, password string) (generated string, err error) {
	s.mu.Lock()
	cur := s.accounts[AdminUser]
	s.mu.Unlock()
	switch {
	case password == "" && cur != nil:
		return "", nil
	case password != "" && cur != nil && CheckPassword(cur.Hash, password):
		return "", nil
	case password == "":
		b := make([]byte, 12)
		_, _ = rand.Read(b)
		generated = base64.RawURLEncoding.EncodeToString(b)
		password = generated
	}
	next := &Account{UserName: AdminUser, Role: RoleAdministrator, Enabled: true, Hash: HashPassword(password), Version: 1}
	if cur != nil {
		next.Version = cur.Version + 1
	}
	p := store.Plan{Objects: []store.ObjectChange{accountChange(next)}}
	p.Objects = append(p.Objects, s.sessionDeletions(AdminUser)...)
	if err := s.commit(ctx, p); err != nil {
		return "", err
	}
	s.mu.Lock()
	s.accounts[AdminUser] = next
	s.dropSessionsOfLocked(AdminUser)
	s.mu.Unlock()
	return generated, nil
}

// Legacy settings (before tenancy records existed).
const (
	legacyAdmin    = "account/" + AdminUser
	legacyAccounts = "accounts"
	legacyTenants  = "tenants"
	legacyLockout  = "lockout"
)

// importLegacy writes the accounts, tenants and lockout policy a store kept
// as JSON settings as records, all in one plan.
func importLegacy(ctx context.Context, st store.Store) error {
	var p store.Plan
	hash, ok, err := st.Setting(ctx, legacyAdmin)
	if err != nil {
		return err
	}
	if ok {
		p.Objects = append(p.Objects, accountChange(&Account{UserName: AdminUser, Role: RoleAdministrator, Enabled: true, Hash: hash, Version: 1}))
	}
	var accounts map[string]*struct {
		Role    string `json:"role"`
		Tenant  string `json:"tenant"`
		Enabled bool   `json:"enabled"`
		Hash    string `json:"hash"`
	}
	if err := legacySetting(ctx, st, legacyAccounts, &accounts); err != nil {
		return err
	}
	for user, a := range accounts {
		if user == AdminUser || a == nil {
			continue
		}
		p.Objects = append(p.Objects, accountChange(&Account{UserName: user, Role: a.Role, Tenant: a.Tenant, Enabled: a.Enabled, Hash: a.Hash, Version: 1}))
	}
	var tenants map[string]*Tenant
	if err := legacySetting(ctx, st, legacyTenants, &tenants); err != nil {
		return err
	}
	for id, t := range tenants {
		if t != nil {
			p.Objects = append(p.Objects, tenantChange(&Tenant{ID: id, Description: t.Description, Quotas: t.Quotas, Version: 1}))
		}
	}
	var lockout *LockoutPolicy
	if err := legacySetting(ctx, st, legacyLockout, &lockout); err != nil {
		return err
	}
	if lockout != nil {
		p.Objects = append(p.Objects, put(kindPolicy, lockoutID, 1, lockout))
	}
	if len(p.Objects) == 0 {
		return nil
	}
	return st.Apply(ctx, p)
}

func legacySetting(ctx context.Context, st store.Store, key string, v any) error {
	raw, ok, err := st.Setting(ctx, key)
	if err != nil || !ok {
		return err
	}
	if err := json.Unmarshal([]byte(raw), v); err != nil {
		return fmt.Errorf("tenancy: legacy setting %s: %w", key, err)
	}
	return nil
}
