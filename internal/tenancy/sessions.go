package tenancy

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"time"

	"rackpool/internal/store"
)

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func hexDecode(s string) ([]byte, error) { return hex.DecodeString(s) }

// IdleTimeout is how long a session may go unused.
func (s *Service) IdleTimeout() time.Duration { return s.idle }

// Authenticate checks a user name and password sent from source (the
// client's address). Successful checks are remembered for a minute by a
// digest of the credentials, so Basic-auth clients do not pay for Argon2 on
// every request.
//
// Failures count per account and source: the lockout policy's threshold of
// them locks the account for that source only (ErrLocked, even for the
// right password), so a client guessing a password cannot lock anyone
// else out. Failures from every source together slow the account's checks
// down instead (Delay: a growing, bounded wait before each), so an attack
// spread over many addresses gains little. A wrong name, a wrong password
// and a disabled account all answer ErrNoAccount.
func (s *Service) Authenticate(user, password, source string) (Principal, error) {
	digest := sha256.Sum256([]byte(user + "\x00" + password))
	key := failureKey{user, source}
	now := s.clk.Now()
	s.mu.Lock()
	acc, ok := s.accounts[user]
	if ok && !acc.Enabled {
		s.mu.Unlock()
		CheckPassword(HashPassword("x"), password)
		return Principal{}, ErrNoAccount
	}
	if f := s.failures[key]; ok && f != nil && now.Before(f.lockedUntil) {
		s.mu.Unlock()
		return Principal{}, ErrLocked
	}
	if until, hit := s.verified[digest]; ok && hit && now.Before(until) {
		p := Principal{User: user, Role: acc.Role, Tenant: acc.Tenant, Host: acc.Host}
		s.mu.Unlock()
		return p, nil
	}
	var hash string
	if ok {
		hash = acc.Hash
	}
	delay := s.delayLocked(user, now)
	s.mu.Unlock()
	if !ok {
		// Spend the same time as a real check so timing does not reveal
		// which accounts exist.
		CheckPassword(HashPassword("x"), password)
		return Principal{}, ErrNoAccount
	}
	if delay > 0 {
		time.Sleep(delay)
	}
	good := CheckPassword(hash, password)
	s.mu.Lock()
	defer s.mu.Unlock()
	acc, ok = s.accounts[user]
	if !ok || acc.Hash != hash {
		return Principal{}, ErrNoAccount // changed meanwhile
	}
	if !good {
		sp := s.spread[user]
		if sp == nil || now.Sub(sp.first) > s.lockout.ResetAfter {
			sp = &failures{first: now}
			s.spread[user] = sp
		}
		sp.count++
		f := s.failures[key]
		if f == nil || now.Sub(f.first) > s.lockout.ResetAfter {
			if len(s.failures) >= maxFailureKeys {
				s.pruneFailuresLocked(now)
			}
			f = &failures{first: now}
			s.failures[key] = f
		}
		f.count++
		if s.lockout.Threshold > 0 && f.count >= s.lockout.Threshold {
			f.lockedUntil = now.Add(s.lockout.Duration)
			f.count, f.first = 0, now
			return Principal{}, ErrLocked
		}
		return Principal{}, ErrNoAccount
	}
	delete(s.failures, key)
	if len(s.verified) > 1024 {
		s.verified = map[[32]byte]time.Time{}
	}
	s.verified[digest] = now.Add(time.Minute)
	return Principal{User: user, Role: acc.Role, Tenant: acc.Tenant, Host: acc.Host}, nil
}

// Bounds of the slowdown of an account under a spread attack.
const (
	delayStep = 100 * time.Millisecond
	MaxDelay  = 3 * time.Second
	// maxFailureKeys bounds the (account, source) counts kept; beyond it
	// the expired ones are dropped, then the oldest.
	maxFailureKeys = 100000
)

// Delay is how long a password check of user waits now: nothing until the
// account's failures from every source within the policy's reset window
// pass twice its threshold, then a tenth of a second more per failure
// beyond, up to MaxDelay.
func (s *Service) Delay(user string) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.delayLocked(user, s.clk.Now())
}

func (s *Service) delayLocked(user string, now time.Time) time.Duration {
	sp := s.spread[user]
	if sp == nil || s.lockout.Threshold <= 0 || now.Sub(sp.first) > s.lockout.ResetAfter {
		return 0
	}
	over := sp.count - 2*s.lockout.Threshold
	if over <= 0 {
		return 0
	}
	return min(time.Duration(over)*delayStep, MaxDelay)
}

// pruneFailuresLocked drops expired failure counts, and if that is not
// enough the oldest half. s.mu must be held.
func (s *Service) pruneFailuresLocked(now time.Time) {
	var firsts []time.Time
	for k, f := range s.failures {
		if now.Sub(f.first) > s.lockout.ResetAfter && !now.Before(f.lockedUntil) {
			delete(s.failures, k)
			continue
		}
		firsts = append(firsts, f.first)
	}
	if len(s.failures) < maxFailureKeys {
		return
	}
	sort.Slice(firsts, func(i, j int) bool { return firsts[i].Before(firsts[j]) })
	cut := firsts[len(firsts)/2]
	for k, f := range s.failures {
		if f.first.Before(cut) && !now.Before(f.lockedUntil) {
			delete(s.failures, k)
		}
	}
}

// Login checks the credentials sent from source and opens a session, stored before Login
// returns. The token is returned once and never kept: the store and the
// cache know only its SHA-256.
func (s *Service) Login(ctx context.Context, user, password, source string) (Session, string, error) {
	if _, err := s.Authenticate(user, password, source); err != nil {
		return Session{}, "", err
	}
	now := s.clk.Now()
	token := randomHex(32)
	ss := &session{Session: Session{ID: randomHex(8), User: user, Created: now, LastUsed: now},
		tokenHash: sha256.Sum256([]byte(token)), stored: now}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.mu.Lock()
	_, ok := s.accounts[user]
	live := 0
	for _, o := range s.sessions {
		if o.User == user && now.Sub(o.LastUsed) <= s.idle {
			live++
		}
	}
	s.mu.Unlock()
	if !ok {
		return Session{}, "", ErrNoAccount // deleted meanwhile
	}
	if live >= s.maxSessions {
		return Session{}, "", fmt.Errorf("%w (%d): delete one of its sessions, or wait until one is idle for %v", ErrSessionLimit, s.maxSessions, s.idle)
	}
	if err := s.commit(ctx, store.Plan{Objects: []store.ObjectChange{sessionChange(ss)}}); err != nil {
		return Session{}, "", err
	}
	s.mu.Lock()
	s.sessions[ss.tokenHash] = ss
	s.mu.Unlock()
	return ss.Session, token, nil
}

func sessionChange(ss *session) store.ObjectChange {
	return put(kindSession, ss.ID, 0, sessionRecord{User: ss.User, TokenHash: hex.EncodeToString(ss.tokenHash[:]),
		Created: ss.Created.UTC(), LastUsed: ss.LastUsed.UTC()})
}

// BySessionToken returns the principal of the live session with token,
// marking it used. The last use reaches the store at most once per quarter
// of the idle timeout, as an intent (see the package comment); a failed
// write there only shortens the session after a restart.
func (s *Service) BySessionToken(ctx context.Context, token string) (Principal, bool) {
	p, err := s.PrincipalOf(ctx, token)
	return p, err == nil
}

// ErrNoSession: the token names no live session.
var ErrNoSession = errors.New("invalid or expired session token")

// PrincipalOf is BySessionToken telling why it fails: ErrNoSession, or an
// error wrapping store.ErrUnavailable when a token this replica does not
// know could not be looked for in the store (another replica may have
// opened it): the caller answers 503, not 401.
func (s *Service) PrincipalOf(ctx context.Context, token string) (Principal, error) {
	h := sha256.Sum256([]byte(token))
	now := s.clk.Now()
	s.mu.Lock()
	ss, ok := s.sessions[h]
	if !ok && s.catchUp != nil {
		s.mu.Unlock()
		if err := s.catchUp(ctx); err != nil {
			if errors.Is(err, store.ErrUnavailable) {
				return Principal{}, err
			}
			return Principal{}, fmt.Errorf("%w: reading the sessions other replicas opened: %v", store.ErrUnavailable, err)
		}
		s.mu.Lock()
		ss, ok = s.sessions[h]
	}
	if !ok {
		s.mu.Unlock()
		return Principal{}, ErrNoSession
	}
	acc := s.accounts[ss.User]
	if now.Sub(ss.LastUsed) > s.idle || acc == nil || !acc.Enabled {
		delete(s.sessions, h)
		s.mu.Unlock()
		_ = s.st.Apply(ctx, store.Plan{Objects: []store.ObjectChange{del(kindSession, ss.ID, 0)}, Intent: true})
		return Principal{}, ErrNoSession
	}
	ss.LastUsed = now
	p := Principal{User: ss.User, Role: acc.Role, Tenant: acc.Tenant, Host: acc.Host, Session: ss.ID}
	var write *store.ObjectChange
	if now.Sub(ss.stored) >= s.touchInterval {
		ss.stored = now
		ch := sessionChange(ss)
		write = &ch
	}
	s.mu.Unlock()
	if write != nil {
		_ = s.st.Apply(ctx, store.Plan{Objects: []store.ObjectChange{*write}, Intent: true})
	}
	return p, nil
}

// expiredLocked removes the sessions idle longer than the timeout from the
// cache and returns their store deletions. s.mu must be held.
func (s *Service) expiredLocked(now time.Time) []store.ObjectChange {
	var out []store.ObjectChange
	for h, ss := range s.sessions {
		if now.Sub(ss.LastUsed) > s.idle {
			delete(s.sessions, h)
			out = append(out, del(kindSession, ss.ID, 0))
		}
	}
	return out
}

// dropExpired deletes the sessions idle longer than the timeout, so that
// no listing shows a session its token can no longer use.
func (s *Service) dropExpired(ctx context.Context) error {
	s.mu.Lock()
	dels := s.expiredLocked(s.clk.Now())
	s.mu.Unlock()
	if len(dels) == 0 {
		return nil
	}
	return s.st.Apply(ctx, store.Plan{Objects: dels, Intent: true})
}

// sessionDeletions returns the store deletions of user's sessions.
func (s *Service) sessionDeletions(user string) []store.ObjectChange {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []store.ObjectChange
	for _, ss := range s.sessions {
		if ss.User == user {
			out = append(out, del(kindSession, ss.ID, 0))
		}
	}
	return out
}

// dropSessionsOfLocked ends every session of user in the cache (the store
// deletions went in the plan that ended them). s.mu must be held.
func (s *Service) dropSessionsOfLocked(user string) {
	for h, ss := range s.sessions {
		if ss.User == user {
			delete(s.sessions, h)
		}
	}
	s.verified = map[[32]byte]time.Time{} // keyed by digest: drop it all
}

// ActiveSessions counts the live sessions.
func (s *Service) ActiveSessions(ctx context.Context) int {
	_ = s.dropExpired(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sessions)
}

// Sessions returns the live sessions, by ID.
func (s *Service) Sessions(ctx context.Context) []Session {
	_ = s.dropExpired(ctx)
	s.mu.Lock()
	out := make([]Session, 0, len(s.sessions))
	for _, ss := range s.sessions {
		out = append(out, ss.Session)
	}
	s.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Session returns the live session id.
func (s *Service) Session(ctx context.Context, id string) (Session, bool) {
	_ = s.dropExpired(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ss := range s.sessions {
		if ss.ID == id {
			return ss.Session, true
		}
	}
	return Session{}, false
}

// Logout deletes session id.
func (s *Service) Logout(ctx context.Context, id string) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.mu.Lock()
	var found *session
	for _, ss := range s.sessions {
		if ss.ID == id {
			found = ss
		}
	}
	s.mu.Unlock()
	if found == nil {
		return &NotFoundError{Kind: kindSession, ID: id}
	}
	if err := s.commit(ctx, store.Plan{Objects: []store.ObjectChange{del(kindSession, id, 0)}}); err != nil {
		return err
	}
	s.mu.Lock()
	delete(s.sessions, found.tokenHash)
	s.mu.Unlock()
	return nil
}
