package redfish

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/argon2"

	"rackpool/internal/clock"
	"rackpool/internal/store"
)

// AdminUser is the built-in administrator account.
const AdminUser = "Administrator"

const adminSettingKey = "account/" + AdminUser

// Password hashing: Argon2id with OWASP's minimum parameters (19 MiB, 2
// passes, 1 lane), a 16-byte salt and a 32-byte key, stored in the PHC
// string format.
const (
	argonTime    = 2
	argonMemory  = 19 * 1024
	argonThreads = 1
	argonKeyLen  = 32
)

// HashPassword returns the PHC-format Argon2id hash of password.
func HashPassword(password string) string {
	salt := make([]byte, 16)
	_, _ = rand.Read(salt)
	key := argon2.IDKey([]byte(password), salt, argonTime, argonMemory, argonThreads, argonKeyLen)
	enc := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, argonMemory, argonTime, argonThreads,
		enc.EncodeToString(salt), enc.EncodeToString(key))
}

// CheckPassword reports whether password matches the PHC hash.
func CheckPassword(hash, password string) bool {
	parts := strings.Split(hash, "$")
	if len(parts) != 6 || parts[1] != "argon2id" {
		return false
	}
	var m, t uint32
	var p uint8
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &m, &t, &p); err != nil || m > 1<<22 || t > 64 || p == 0 {
		return false
	}
	enc := base64.RawStdEncoding
	salt, err1 := enc.DecodeString(parts[4])
	want, err2 := enc.DecodeString(parts[5])
	if err1 != nil || err2 != nil || len(want) == 0 {
		return false
	}
	got := argon2.IDKey([]byte(password), salt, t, m, p, uint32(len(want)))
	return subtle.ConstantTimeCompare(got, want) == 1
}

// Roles: the three standard Redfish roles.
const (
	RoleAdministrator = "Administrator"
	RoleOperator      = "Operator"
	RoleReadOnly      = "ReadOnly"
)

// roles lists each role's privileges.
var roles = map[string][]string{
	RoleAdministrator: {"Login", "ConfigureManager", "ConfigureUsers", "ConfigureSelf", "ConfigureComponents"},
	RoleOperator:      {"Login", "ConfigureSelf", "ConfigureComponents"},
	RoleReadOnly:      {"Login", "ConfigureSelf"},
}

// Account is one user of the service. Hash is the Argon2id PHC string;
// it never leaves the process except into the store.
type Account struct {
	UserName string `json:"user"`
	Role     string `json:"role"`
	Tenant   string `json:"tenant,omitempty"`
	Enabled  bool   `json:"enabled"`
	Hash     string `json:"hash"`
	// Version counts the account's changes; its ETag is W/"Version".
	Version int64 `json:"version"`
}

// Tenant is a group of accounts that see and act only on their own
// compositions and reservations (and the free pool), within quotas.
type Tenant struct {
	ID          string         `json:"id"`
	Description string         `json:"description,omitempty"`
	Quotas      map[string]int `json:"quotas,omitempty"` // block kind -> most blocks held
}

// Principal is the authenticated identity of a request.
type Principal struct {
	User, Role, Tenant string
	Session            string // session ID, when authenticated by token
}

// has reports whether p's role grants the Redfish privilege priv.
func (p Principal) has(priv string) bool {
	for _, x := range roles[p.Role] {
		if x == priv {
			return true
		}
	}
	return false
}

// sees reports whether p may see what tenant owns: accounts without a
// tenant see everything; a tenant's accounts see only their tenant's.
func (p Principal) sees(tenant string) bool { return p.Tenant == "" || p.Tenant == tenant }

// LockoutPolicy is AccountService's account lockout: Threshold failed
// logins within ResetAfter lock the account for Duration. Threshold 0
// disables lockout.
type LockoutPolicy struct {
	Threshold  int           `json:"threshold"`
	Duration   time.Duration `json:"duration"`
	ResetAfter time.Duration `json:"reset_after"`
}

// DefaultLockout: 5 failures in 5 minutes lock an account for 5 minutes.
var DefaultLockout = LockoutPolicy{Threshold: 5, Duration: 5 * time.Minute, ResetAfter: 5 * time.Minute}

// MinPasswordLength is the shortest password accepted for a new account.
const MinPasswordLength = 8

const (
	accountsSettingKey = "accounts"
	tenantsSettingKey  = "tenants"
	lockoutSettingKey  = "lockout"
)

// Auth holds the accounts, tenants and sessions of the service.
type Auth struct {
	clk       clock.Clock
	idleLimit time.Duration
	st        store.Store

	mu       sync.Mutex
	accounts map[string]*Account // by user name; the Administrator included
	tenants  map[string]*Tenant
	lockout  LockoutPolicy
	failures map[string]*failures
	verified map[[32]byte]time.Time
	sessions map[string]*session // by token
}

type failures struct {
	count       int
	first       time.Time
	lockedUntil time.Time
}

type session struct {
	ID       string
	User     string
	token    string
	Created  time.Time
	LastUsed time.Time
}

// SetupAdmin makes sure the Administrator account has a password: the one
// in envPassword when set (replacing any stored one), else the stored one,
// else a generated one, which it returns so the caller can show it once.
func SetupAdmin(ctx context.Context, st store.Store, envPassword string) (generated string, err error) {
	if envPassword != "" {
		return "", st.PutSetting(ctx, adminSettingKey, HashPassword(envPassword))
	}
	if _, ok, err := st.Setting(ctx, adminSettingKey); err != nil || ok {
		return "", err
	}
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	generated = base64.RawURLEncoding.EncodeToString(b)
	return generated, st.PutSetting(ctx, adminSettingKey, HashPassword(generated))
}

// NewAuth loads the accounts and tenants from st. Sessions idle longer
// than idle expire.
func NewAuth(ctx context.Context, st store.Store, clk clock.Clock, idle time.Duration) (*Auth, error) {
	hash, ok, err := st.Setting(ctx, adminSettingKey)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, errors.New("no administrator password set (call SetupAdmin first)")
	}
	if idle <= 0 {
		idle = 30 * time.Minute
	}
	a := &Auth{clk: clk, idleLimit: idle, st: st, accounts: map[string]*Account{}, tenants: map[string]*Tenant{},
		lockout: DefaultLockout, failures: map[string]*failures{},
		verified: map[[32]byte]time.Time{}, sessions: map[string]*session{}}
	if err := loadSetting(ctx, st, accountsSettingKey, &a.accounts); err != nil {
		return nil, err
	}
	if err := loadSetting(ctx, st, tenantsSettingKey, &a.tenants); err != nil {
		return nil, err
	}
	if err := loadSetting(ctx, st, lockoutSettingKey, &a.lockout); err != nil {
		return nil, err
	}
	a.accounts[AdminUser] = &Account{UserName: AdminUser, Role: RoleAdministrator, Enabled: true, Hash: hash, Version: 1}
	return a, nil
}

func loadSetting(ctx context.Context, st store.Store, key string, v any) error {
	raw, ok, err := st.Setting(ctx, key)
	if err != nil || !ok {
		return err
	}
	if err := json.Unmarshal([]byte(raw), v); err != nil {
		return fmt.Errorf("setting %s: %w", key, err)
	}
	return nil
}

// saveLocked writes the accounts (all but the built-in Administrator's,
// whose hash has its own setting), tenants and lockout policy. a.mu must
// be held.
func (a *Auth) saveLocked(ctx context.Context) error {
	others := map[string]*Account{}
	for n, acc := range a.accounts {
		if n != AdminUser {
			others[n] = acc
		}
	}
	for key, v := range map[string]any{accountsSettingKey: others, tenantsSettingKey: a.tenants, lockoutSettingKey: a.lockout} {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		if err := a.st.PutSetting(ctx, key, string(b)); err != nil {
			return err
		}
	}
	return a.st.PutSetting(ctx, adminSettingKey, a.accounts[AdminUser].Hash)
}

// errLocked: the account is locked out after repeated failures.
var errLocked = errors.New("account locked")

// verify checks a user name and password. Successful checks are
// remembered for a minute by a digest of the credentials, so Basic-auth
// clients do not pay for Argon2 on every request. Repeated failures lock
// the account (errLocked) even for the right password.
func (a *Auth) verify(user, password string) (Principal, error) {
	digest := sha256.Sum256([]byte(user + "\x00" + password))
	now := a.clk.Now()
	a.mu.Lock()
	acc, ok := a.accounts[user]
	if ok && !acc.Enabled {
		a.mu.Unlock()
		CheckPassword(HashPassword("x"), password)
		return Principal{}, errNoAccount
	}
	if f := a.failures[user]; ok && f != nil && now.Before(f.lockedUntil) {
		a.mu.Unlock()
		return Principal{}, errLocked
	}
	if until, hit := a.verified[digest]; ok && hit && now.Before(until) {
		p := Principal{User: user, Role: acc.Role, Tenant: acc.Tenant}
		a.mu.Unlock()
		return p, nil
	}
	var hash string
	if ok {
		hash = acc.Hash
	}
	a.mu.Unlock()
	if !ok {
		// Spend the same time as a real check so timing does not reveal
		// which accounts exist.
		CheckPassword(HashPassword("x"), password)
		return Principal{}, errNoAccount
	}
	good := CheckPassword(hash, password)
	a.mu.Lock()
	defer a.mu.Unlock()
	acc, ok = a.accounts[user]
	if !ok || acc.Hash != hash {
		return Principal{}, errNoAccount // changed meanwhile
	}
	if !good {
		f := a.failures[user]
		if f == nil || now.Sub(f.first) > a.lockout.ResetAfter {
			f = &failures{first: now}
			a.failures[user] = f
		}
		f.count++
		if a.lockout.Threshold > 0 && f.count >= a.lockout.Threshold {
			f.lockedUntil = now.Add(a.lockout.Duration)
			f.count, f.first = 0, now
			return Principal{}, errLocked
		}
		return Principal{}, errNoAccount
	}
	delete(a.failures, user)
	if len(a.verified) > 1024 {
		a.verified = map[[32]byte]time.Time{}
	}
	a.verified[digest] = now.Add(time.Minute)
	return Principal{User: user, Role: acc.Role, Tenant: acc.Tenant}, nil
}

// errNoAccount: wrong user name or password (never says which).
var errNoAccount = errors.New("invalid credentials")

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// login creates a session.
func (a *Auth) login(user, password string) (*session, error) {
	if _, err := a.verify(user, password); err != nil {
		return nil, err
	}
	now := a.clk.Now()
	s := &session{ID: randomHex(8), User: user, token: randomHex(32), Created: now, LastUsed: now}
	a.mu.Lock()
	a.sessions[s.token] = s
	a.mu.Unlock()
	return s, nil
}

// bySessionToken returns the principal of the live session with token,
// touching it.
func (a *Auth) bySessionToken(token string) (Principal, bool) {
	now := a.clk.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	s, ok := a.sessions[token]
	if !ok {
		return Principal{}, false
	}
	acc := a.accounts[s.User]
	if now.Sub(s.LastUsed) > a.idleLimit || acc == nil || !acc.Enabled {
		delete(a.sessions, token)
		return Principal{}, false
	}
	s.LastUsed = now
	return Principal{User: s.User, Role: acc.Role, Tenant: acc.Tenant, Session: s.ID}, true
}

// dropIdle deletes the sessions idle longer than the limit, so that no
// listing shows a session its token can no longer use. Call with a.mu held.
func (a *Auth) dropIdle(now time.Time) {
	for tok, s := range a.sessions {
		if now.Sub(s.LastUsed) > a.idleLimit {
			delete(a.sessions, tok)
		}
	}
}

// dropSessionsOf ends every session of user. Call with a.mu held.
func (a *Auth) dropSessionsOf(user string) {
	for tok, s := range a.sessions {
		if s.User == user {
			delete(a.sessions, tok)
		}
	}
	for k := range a.verified {
		delete(a.verified, k) // the cache is keyed by digest; drop it all
	}
}

// ActiveSessions counts the live sessions.
func (a *Auth) ActiveSessions() int {
	now := a.clk.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	a.dropIdle(now)
	return len(a.sessions)
}

func (a *Auth) listSessions() []session {
	now := a.clk.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	a.dropIdle(now)
	out := make([]session, 0, len(a.sessions))
	for _, s := range a.sessions {
		out = append(out, *s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

func (a *Auth) sessionByID(id string) (session, bool) {
	now := a.clk.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	a.dropIdle(now)
	for _, s := range a.sessions {
		if s.ID == id {
			return *s, true
		}
	}
	return session{}, false
}

func (a *Auth) logout(id string) bool {
	now := a.clk.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	a.dropIdle(now)
	for tok, s := range a.sessions {
		if s.ID == id {
			delete(a.sessions, tok)
			return true
		}
	}
	return false
}
