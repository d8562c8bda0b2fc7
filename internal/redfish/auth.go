package redfish

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
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

// Auth holds the accounts and sessions of the service.
type Auth struct {
	clk       clock.Clock
	idleLimit time.Duration

	mu       sync.Mutex
	hashes   map[string]string // user -> PHC hash
	verified map[[32]byte]time.Time
	sessions map[string]*session // by token
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

// NewAuth loads the accounts from st. Sessions idle longer than idle
// expire.
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
	return &Auth{clk: clk, idleLimit: idle, hashes: map[string]string{AdminUser: hash},
		verified: map[[32]byte]time.Time{}, sessions: map[string]*session{}}, nil
}

// verify checks a user name and password. Successful checks are
// remembered for a minute by a digest of the credentials, so Basic-auth
// clients do not pay for Argon2 on every request.
func (a *Auth) verify(user, password string) bool {
	digest := sha256.Sum256([]byte(user + "\x00" + password))
	now := a.clk.Now()
	a.mu.Lock()
	if until, ok := a.verified[digest]; ok && now.Before(until) {
		a.mu.Unlock()
		return true
	}
	hash, ok := a.hashes[user]
	a.mu.Unlock()
	if !ok {
		// Spend the same time as a real check so timing does not reveal
		// which accounts exist.
		CheckPassword(HashPassword("x"), password)
		return false
	}
	if !CheckPassword(hash, password) {
		return false
	}
	a.mu.Lock()
	if len(a.verified) > 1024 {
		a.verified = map[[32]byte]time.Time{}
	}
	a.verified[digest] = now.Add(time.Minute)
	a.mu.Unlock()
	return true
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// login creates a session.
func (a *Auth) login(user, password string) (*session, bool) {
	if !a.verify(user, password) {
		return nil, false
	}
	now := a.clk.Now()
	s := &session{ID: randomHex(8), User: user, token: randomHex(32), Created: now, LastUsed: now}
	a.mu.Lock()
	a.sessions[s.token] = s
	a.mu.Unlock()
	return s, true
}

// bySessionToken returns the live session with token, touching it.
func (a *Auth) bySessionToken(token string) (*session, bool) {
	now := a.clk.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	s, ok := a.sessions[token]
	if !ok {
		return nil, false
	}
	if now.Sub(s.LastUsed) > a.idleLimit {
		delete(a.sessions, token)
		return nil, false
	}
	s.LastUsed = now
	return s, true
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

func (a *Auth) listSessions() []session {
	now := a.clk.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	a.dropIdle(now)
	out := make([]session, 0, len(a.sessions))
	for _, s := range a.sessions {
		out = append(out, *s)
	}
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
