package tenancy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"rackpool/internal/clock"
	"rackpool/internal/inventory"
	"rackpool/internal/store"
	"rackpool/internal/store/sqlite"
	"rackpool/internal/tenancy"
)

const adminPassword = "admin-password-1"

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// fixture is a store directory that services are opened (and reopened,
// as after a restart) on.
type fixture struct {
	t   *testing.T
	dir string
	clk *clock.Manual
	st  *sqlite.Store
}

func newFixture(t *testing.T) *fixture {
	f := &fixture{t: t, dir: t.TempDir(), clk: clock.NewManual(t0)}
	f.reopenStore()
	return f
}

func (f *fixture) reopenStore() {
	f.t.Helper()
	if f.st != nil {
		if err := f.st.Close(); err != nil {
			f.t.Fatal(err)
		}
	}
	st, err := sqlite.Open(f.dir)
	if err != nil {
		f.t.Fatal(err)
	}
	f.st = st
	f.t.Cleanup(func() { _ = st.Close() })
}

func (f *fixture) open(password string) *tenancy.Service {
	f.t.Helper()
	s, _, err := tenancy.Open(context.Background(), f.st, tenancy.Options{Clock: f.clk, IdleTimeout: 30 * time.Minute, AdminPassword: password})
	if err != nil {
		f.t.Fatalf("Open: %v", err)
	}
	return s
}

func TestAdministratorPassword(t *testing.T) {
	f := newFixture(t)
	s, generated, err := tenancy.Open(context.Background(), f.st, tenancy.Options{Clock: f.clk})
	if err != nil {
		t.Fatal(err)
	}
	if len(generated) < 12 {
		t.Fatalf("generated password %q", generated)
	}
	if p, err := s.Authenticate(tenancy.AdminUser, generated, "192.0.2.1"); err != nil || p.Role != tenancy.RoleAdministrator {
		t.Fatalf("Authenticate with the generated password: %+v %v", p, err)
	}
	// A restart without a password keeps the stored one and generates none.
	f.reopenStore()
	s, again, err := tenancy.Open(context.Background(), f.st, tenancy.Options{Clock: f.clk})
	if err != nil || again != "" {
		t.Fatalf("reopen: generated %q, %v", again, err)
	}
	if _, err := s.Authenticate(tenancy.AdminUser, generated, "192.0.2.1"); err != nil {
		t.Fatalf("after restart: %v", err)
	}
	// A password given at start replaces it.
	s = f.open(adminPassword)
	if _, err := s.Authenticate(tenancy.AdminUser, generated, "192.0.2.1"); !errors.Is(err, tenancy.ErrNoAccount) {
		t.Fatalf("old password after reset: %v", err)
	}
	if _, err := s.Authenticate(tenancy.AdminUser, adminPassword, "192.0.2.1"); err != nil {
		t.Fatal(err)
	}
}

func TestSessionsSurviveRestart(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	s := f.open(adminPassword)
	sess, token, err := s.Login(ctx, tenancy.AdminUser, adminPassword, "192.0.2.1")
	if err != nil {
		t.Fatal(err)
	}
	_, other, err := s.Login(ctx, tenancy.AdminUser, adminPassword, "192.0.2.1")
	if err != nil {
		t.Fatal(err)
	}
	// The token itself is stored nowhere.
	objs, err := f.st.Objects(ctx, "session")
	if err != nil || len(objs) != 2 {
		t.Fatalf("session records: %d, %v", len(objs), err)
	}
	for _, o := range objs {
		if bytes.Contains(o.Data, []byte(token)) || bytes.Contains(o.Data, []byte(other)) {
			t.Fatalf("a session record holds its token: %s", o.Data)
		}
	}
	f.clk.Advance(10 * time.Minute)
	if _, ok := s.BySessionToken(ctx, token); !ok {
		t.Fatal("session refused before the restart")
	}
	if err := s.Logout(ctx, s.Sessions(ctx)[indexOf(s.Sessions(ctx), sess.ID)^1].ID); err != nil {
		t.Fatal(err)
	}

	// Restart: the live session still works, the logged-out one does not.
	f.reopenStore()
	s = f.open(adminPassword)
	p, ok := s.BySessionToken(ctx, token)
	if !ok || p.User != tenancy.AdminUser || p.Session != sess.ID {
		t.Fatalf("after restart: %+v %v", p, ok)
	}
	if _, ok := s.BySessionToken(ctx, other); ok {
		t.Fatal("a logged-out session came back after the restart")
	}
	if got := s.Sessions(ctx); len(got) != 1 || got[0].ID != sess.ID || !got[0].Created.Equal(t0) {
		t.Fatalf("sessions after restart: %+v", got)
	}
	if _, ok := s.BySessionToken(ctx, "not-a-token"); ok {
		t.Fatal("an unknown token was accepted")
	}

	// Idle past the timeout while the service is down: gone at start.
	f.clk.Advance(31 * time.Minute)
	f.reopenStore()
	s = f.open(adminPassword)
	if _, ok := s.BySessionToken(ctx, token); ok {
		t.Fatal("an expired session came back")
	}
	if objs, _ := f.st.Objects(ctx, "session"); len(objs) != 0 {
		t.Fatalf("%d expired session records left in the store", len(objs))
	}
}

func indexOf(ss []tenancy.Session, id string) int {
	for i, s := range ss {
		if s.ID == id {
			return i
		}
	}
	return -1
}

// A session used often keeps its place across a restart: its last use is
// written back lazily, often enough that it does not expire early by more
// than a quarter of the idle timeout.
func TestSessionLastUseIsWrittenBack(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	s := f.open(adminPassword)
	_, token, err := s.Login(ctx, tenancy.AdminUser, adminPassword, "192.0.2.1")
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 12; i++ { // used every 5 minutes for an hour
		f.clk.Advance(5 * time.Minute)
		if _, ok := s.BySessionToken(ctx, token); !ok {
			t.Fatalf("refused after %d uses", i)
		}
	}
	f.clk.Advance(20 * time.Minute) // 20 min since the last use, < 30
	f.reopenStore()
	s = f.open(adminPassword)
	if _, ok := s.BySessionToken(ctx, token); !ok {
		t.Fatal("a session in use expired across a restart")
	}
}

func TestAccountsAndTenantsPersist(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	s := f.open(adminPassword)
	if _, err := s.CreateTenant(ctx, tenancy.Tenant{ID: "blue", Quotas: map[string]int{"gpu": 2}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateTenant(ctx, tenancy.Tenant{ID: "blue"}); !errors.As(err, new(*tenancy.ExistsError)) {
		t.Fatalf("second blue: %v", err)
	}
	a, err := s.CreateAccount(ctx, tenancy.NewAccount{UserName: "ann", Password: "ann-password", Role: tenancy.RoleOperator, Tenant: "blue", Enabled: true})
	if err != nil || a.Version != 1 {
		t.Fatalf("CreateAccount: %+v %v", a, err)
	}
	role := tenancy.RoleReadOnly
	if a, err = s.UpdateAccount(ctx, "ann", tenancy.AccountChange{Role: &role}); err != nil || a.Version != 2 {
		t.Fatalf("UpdateAccount: %+v %v", a, err)
	}
	if err := s.SetLockout(ctx, tenancy.LockoutPolicy{Threshold: 3, Duration: time.Minute, ResetAfter: time.Minute}); err != nil {
		t.Fatal(err)
	}

	f.reopenStore()
	s = f.open(adminPassword)
	got, ok := s.Account("ann")
	if !ok || got.Role != tenancy.RoleReadOnly || got.Tenant != "blue" || got.Version != 2 {
		t.Fatalf("ann after restart: %+v %v", got, ok)
	}
	if p, err := s.Authenticate("ann", "ann-password", "192.0.2.1"); err != nil || p.Tenant != "blue" || p.Has(tenancy.ConfigureComponents) {
		t.Fatalf("ann authenticates as %+v, %v", p, err)
	}
	if tn, ok := s.Tenant("blue"); !ok || tn.Quotas["gpu"] != 2 {
		t.Fatalf("tenant after restart: %+v", tn)
	}
	if lp := s.Lockout(); lp.Threshold != 3 || lp.Duration != time.Minute {
		t.Fatalf("lockout after restart: %+v", lp)
	}
	// A tenant with accounts cannot go; without them it can.
	if err := s.DeleteTenant(ctx, "blue"); !errors.As(err, new(*tenancy.InUseError)) {
		t.Fatalf("delete a tenant in use: %v", err)
	}
	if err := s.DeleteAccount(ctx, "ann"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteTenant(ctx, "blue"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteAccount(ctx, tenancy.AdminUser); !errors.Is(err, tenancy.ErrBuiltIn) {
		t.Fatalf("delete the Administrator: %v", err)
	}
}

// Bad input is refused with an error naming the property and changes
// nothing in the store.
func TestBadInputChangesNothing(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	s := f.open(adminPassword)
	before := f.records()
	bad := []struct {
		name string
		err  error
		prop string
	}{}
	try := func(name, prop string, err error) {
		bad = append(bad, struct {
			name string
			err  error
			prop string
		}{name, err, prop})
	}
	_, err := s.CreateAccount(ctx, tenancy.NewAccount{UserName: "bad name", Password: "long-enough", Role: tenancy.RoleOperator})
	try("user name with a space", "UserName", err)
	_, err = s.CreateAccount(ctx, tenancy.NewAccount{UserName: "u", Password: "short", Role: tenancy.RoleOperator})
	try("short password", "Password", err)
	_, err = s.CreateAccount(ctx, tenancy.NewAccount{UserName: "u", Password: "long-enough", Role: "Root"})
	try("unknown role", "RoleId", err)
	_, err = s.CreateAccount(ctx, tenancy.NewAccount{UserName: "u", Password: "long-enough", Role: tenancy.RoleOperator, Tenant: "nope"})
	try("unknown tenant", "Tenant", err)
	_, err = s.CreateAccount(ctx, tenancy.NewAccount{UserName: "u", Password: "long-enough", Role: tenancy.RoleAdministrator, Tenant: "nope"})
	try("administrator in a tenant", "Tenant", err)
	_, err = s.CreateTenant(ctx, tenancy.Tenant{ID: "t", Quotas: map[string]int{"unicorn": 1}})
	try("unknown quota kind", "Quotas", err)
	_, err = s.CreateTenant(ctx, tenancy.Tenant{ID: "t", Quotas: map[string]int{"gpu": -1}})
	try("negative quota", "Quotas.gpu", err)
	enabled := false
	_, err = s.UpdateAccount(ctx, tenancy.AdminUser, tenancy.AccountChange{Enabled: &enabled})
	try("disable the Administrator", "RoleId", err)
	err = s.SetLockout(ctx, tenancy.LockoutPolicy{Threshold: -1})
	try("negative lockout", "AccountLockoutThreshold", err)
	for _, b := range bad {
		var inv *tenancy.InvalidError
		if !errors.As(b.err, &inv) || inv.Property != b.prop {
			t.Errorf("%s: %v, want an InvalidError on %s", b.name, b.err, b.prop)
		}
	}
	if _, err := s.UpdateAccount(ctx, "nobody", tenancy.AccountChange{}); !errors.As(err, new(*tenancy.NotFoundError)) {
		t.Errorf("update an unknown account: %v", err)
	}
	if after := f.records(); after != before {
		t.Errorf("refused changes wrote to the store:\nbefore %s\nafter  %s", before, after)
	}
}

// records renders every tenancy record (kind, ID, version) in the store.
func (f *fixture) records() string {
	var out []string
	for _, kind := range []string{"account", "tenant", "session", "tenancy"} {
		objs, err := f.st.Objects(context.Background(), kind)
		if err != nil {
			f.t.Fatal(err)
		}
		for _, o := range objs {
			out = append(out, kind+"/"+o.ID+"@"+string(rune('0'+o.Version)))
		}
	}
	b, _ := json.Marshal(out)
	return string(b)
}

// Two services on one store (two replicas on one database) never
// overwrite each other's changes: the second writer of a record it read
// before the first wrote gets store.ErrConflict, sees the change, and a
// retry applies on top of it.
func TestTwoWritersConflict(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	a := f.open(adminPassword)
	b := f.open(adminPassword)
	if _, err := a.CreateTenant(ctx, tenancy.Tenant{ID: "red"}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.CreateTenant(ctx, tenancy.Tenant{ID: "red", Description: "b's"}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("b creates red again: %v, want a conflict", err)
	}
	if _, ok := b.Tenant("red"); !ok {
		t.Fatal("b did not re-read after the conflict")
	}
	if _, err := a.CreateAccount(ctx, tenancy.NewAccount{UserName: "rob", Password: "rob-password", Role: tenancy.RoleOperator, Tenant: "red", Enabled: true}); err != nil {
		t.Fatal(err)
	}
	// b has not seen rob join red: its deletion conflicts, and its retry
	// (on fresh state) finds red in use.
	if err := b.DeleteTenant(ctx, "red"); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("b deletes red while a's account is in it: %v, want a conflict", err)
	}
	if err := b.DeleteTenant(ctx, "red"); !errors.As(err, new(*tenancy.InUseError)) {
		t.Fatalf("b's retry: %v, want in use", err)
	}
	ro, op := tenancy.RoleReadOnly, tenancy.RoleOperator
	if _, err := a.UpdateAccount(ctx, "rob", tenancy.AccountChange{Role: &ro}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.UpdateAccount(ctx, "rob", tenancy.AccountChange{Role: &op}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("b updates rob on a stale read: %v, want a conflict", err)
	}
	got, err := b.UpdateAccount(ctx, "rob", tenancy.AccountChange{Role: &op})
	if err != nil || got.Version != 3 {
		t.Fatalf("b's retry: %+v %v", got, err)
	}
}

// Quota returns the tenant record it read, and a plan checking it fails
// once the tenant changed: the quota and what it allowed commit together.
func TestQuotaCarriesItsRecord(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	s := f.open(adminPassword)
	if q, refs := s.Quota(""); q != nil || refs != nil {
		t.Fatalf("no tenant: %v %v", q, refs)
	}
	if _, err := s.CreateTenant(ctx, tenancy.Tenant{ID: "green", Quotas: map[string]int{"gpu": 4}}); err != nil {
		t.Fatal(err)
	}
	q, refs := s.Quota("green")
	if q[inventory.GPU] != 4 || len(refs) != 1 || refs[0].Version != 1 {
		t.Fatalf("Quota: %v %+v", q, refs)
	}
	mark := func(id string) store.Plan {
		return store.Plan{Objects: []store.ObjectChange{{Kind: "test", Object: store.Object{ID: id, Data: []byte("{}")}}}, Check: refs}
	}
	if err := f.st.Apply(ctx, mark("before")); err != nil {
		t.Fatalf("plan on a current quota: %v", err)
	}
	if _, err := s.PutTenant(ctx, tenancy.Tenant{ID: "green", Quotas: map[string]int{"gpu": 1}}); err != nil {
		t.Fatal(err)
	}
	if err := f.st.Apply(ctx, mark("after")); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("plan on a stale quota: %v, want a conflict", err)
	}
}

func TestLockout(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	s := f.open(adminPassword)
	if err := s.SetLockout(ctx, tenancy.LockoutPolicy{Threshold: 3, Duration: time.Minute, ResetAfter: time.Minute}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if _, err := s.Authenticate(tenancy.AdminUser, "wrong", "192.0.2.1"); !errors.Is(err, tenancy.ErrNoAccount) {
			t.Fatalf("failure %d: %v", i, err)
		}
	}
	if _, err := s.Authenticate(tenancy.AdminUser, "wrong", "192.0.2.1"); !errors.Is(err, tenancy.ErrLocked) {
		t.Fatalf("third failure: %v", err)
	}
	if _, err := s.Authenticate(tenancy.AdminUser, adminPassword, "192.0.2.1"); !errors.Is(err, tenancy.ErrLocked) || !s.Locked(tenancy.AdminUser) {
		t.Fatalf("right password while locked: %v", err)
	}
	// Locked for that source only: another logs in, with Basic or a
	// session, and its failures count apart.
	if _, err := s.Authenticate(tenancy.AdminUser, adminPassword, "192.0.2.2"); err != nil {
		t.Fatalf("right password from another source: %v", err)
	}
	if _, _, err := s.Login(ctx, tenancy.AdminUser, adminPassword, "192.0.2.3"); err != nil {
		t.Fatalf("login from another source: %v", err)
	}
	if _, err := s.Authenticate(tenancy.AdminUser, "wrong", "192.0.2.2"); !errors.Is(err, tenancy.ErrNoAccount) {
		t.Fatalf("first failure from another source: %v", err)
	}
	f.clk.Advance(61 * time.Second)
	if _, err := s.Authenticate(tenancy.AdminUser, adminPassword, "192.0.2.1"); err != nil {
		t.Fatalf("after the lockout: %v", err)
	}
}

// A store written before tenancy records existed kept accounts, tenants
// and the lockout policy as JSON settings: Open imports them once.
func TestImportLegacySettings(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	set := func(k, v string) {
		if err := f.st.PutSetting(ctx, k, v); err != nil {
			t.Fatal(err)
		}
	}
	set("account/Administrator", tenancy.HashPassword(adminPassword))
	set("accounts", `{"old":{"user":"old","role":"Operator","tenant":"t1","enabled":true,"hash":"`+tenancy.HashPassword("old-password")+`","version":4}}`)
	set("tenants", `{"t1":{"id":"t1","quotas":{"gpu":3}}}`)
	set("lockout", `{"threshold":7,"duration":60000000000,"reset_after":60000000000}`)
	s, generated, err := tenancy.Open(ctx, f.st, tenancy.Options{Clock: f.clk})
	if err != nil || generated != "" {
		t.Fatalf("Open: %q %v", generated, err)
	}
	if _, err := s.Authenticate(tenancy.AdminUser, adminPassword, "192.0.2.1"); err != nil {
		t.Fatal(err)
	}
	if p, err := s.Authenticate("old", "old-password", "192.0.2.1"); err != nil || p.Tenant != "t1" {
		t.Fatalf("old: %+v %v", p, err)
	}
	if tn, _ := s.Tenant("t1"); tn.Quotas["gpu"] != 3 {
		t.Fatalf("t1: %+v", tn)
	}
	if s.Lockout().Threshold != 7 {
		t.Fatalf("lockout: %+v", s.Lockout())
	}
	// Imported once: a later change is not undone by the old settings.
	if err := s.DeleteAccount(ctx, "old"); err != nil {
		t.Fatal(err)
	}
	s = f.open("")
	if _, ok := s.Account("old"); ok {
		t.Fatal("the legacy account was imported again")
	}
}

// TestSpreadAttack: failures from many sources lock none of them out of
// an account they have not failed three times from, and slow the
// account's checks by a growing, bounded delay instead; a password reset
// clears it.
func TestSpreadAttack(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	s := f.open(adminPassword)
	if err := s.SetLockout(ctx, tenancy.LockoutPolicy{Threshold: 3, Duration: time.Minute, ResetAfter: time.Minute}); err != nil {
		t.Fatal(err)
	}
	var last time.Duration
	for i := range 12 {
		src := fmt.Sprintf("198.51.100.%d", i)
		if _, err := s.Authenticate(tenancy.AdminUser, "wrong", src); !errors.Is(err, tenancy.ErrNoAccount) {
			t.Fatalf("failure %d: %v", i, err)
		}
		d := s.Delay(tenancy.AdminUser)
		if i < 6 && d != 0 || i >= 6 && d <= last || d > tenancy.MaxDelay {
			t.Errorf("after %d failures from as many sources the delay is %v (before: %v)", i+1, d, last)
		}
		last = d
	}
	if s.Locked(tenancy.AdminUser) {
		t.Error("a spread attack locked the account")
	}
	if _, err := s.Authenticate(tenancy.AdminUser, adminPassword, "192.0.2.9"); err != nil {
		t.Errorf("the right password during a spread attack: %v", err)
	}
	f.clk.Advance(61 * time.Second)
	if d := s.Delay(tenancy.AdminUser); d != 0 {
		t.Errorf("delay after the reset window: %v", d)
	}
}

// TestSessionLimit: an account holds at most MaxSessions live sessions; a
// login beyond fails with ErrSessionLimit and stores nothing; logging out
// of one, or one going idle, makes room.
func TestSessionLimit(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	s, _, err := tenancy.Open(ctx, f.st, tenancy.Options{Clock: f.clk, IdleTimeout: 30 * time.Minute, AdminPassword: adminPassword, MaxSessions: 3})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for range 3 {
		sess, _, err := s.Login(ctx, tenancy.AdminUser, adminPassword, "192.0.2.1")
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, sess.ID)
	}
	if _, _, err := s.Login(ctx, tenancy.AdminUser, adminPassword, "192.0.2.1"); !errors.Is(err, tenancy.ErrSessionLimit) {
		t.Fatalf("a fourth session: %v, want ErrSessionLimit", err)
	}
	if n := s.ActiveSessions(ctx); n != 3 {
		t.Errorf("%d sessions after the refused login, want 3", n)
	}
	if err := s.Logout(ctx, ids[0]); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Login(ctx, tenancy.AdminUser, adminPassword, "192.0.2.1"); err != nil {
		t.Fatalf("a login after a logout: %v", err)
	}
	f.clk.Advance(31 * time.Minute)
	if _, _, err := s.Login(ctx, tenancy.AdminUser, adminPassword, "192.0.2.1"); err != nil {
		t.Fatalf("a login once the others went idle: %v", err)
	}
}

// racingStore holds back the first n Applies until all n have arrived,
// so that n services opening together all decide before any writes: the
// race of replicas starting at the same instant, every time.
type racingStore struct {
	store.Store
	arrived atomic.Int32
	n       int32
	all     sync.WaitGroup
}

func newRacingStore(st store.Store, n int) *racingStore {
	r := &racingStore{Store: st, n: int32(n)}
	r.all.Add(n)
	return r
}

func (r *racingStore) Apply(ctx context.Context, p store.Plan) error {
	if r.arrived.Add(1) <= r.n {
		r.all.Done()
		r.all.Wait()
	}
	return r.Store.Apply(ctx, p)
}

// TestOpenTogether: services opening together on an empty store all open.
// Without a password exactly one generates the Administrator's, and it
// works at every one; with one, it works at every one.
func TestOpenTogether(t *testing.T) {
	const n = 3
	for _, password := range []string{"", adminPassword} {
		f := newFixture(t)
		st := newRacingStore(f.st, n)
		services := make([]*tenancy.Service, n)
		generated := make([]string, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				services[i], generated[i], errs[i] = tenancy.Open(context.Background(), st, tenancy.Options{Clock: f.clk, AdminPassword: password})
			})
		}
		wg.Wait()
		want := password
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("password %q: service %d of %d opened together: %v", password, i+1, n, errs[i])
			}
			if generated[i] != "" {
				if want != "" {
					t.Fatalf("password %q: two services generated a password (%q, %q)", password, want, generated[i])
				}
				want = generated[i]
			}
		}
		if want == "" {
			t.Fatalf("no service generated a password")
		}
		for i, s := range services {
			if _, err := s.Authenticate(tenancy.AdminUser, want, "192.0.2.1"); err != nil {
				t.Errorf("password %q: service %d refuses the Administrator's: %v", password, i+1, err)
			}
		}
	}
}

// TestUnlock: an administrator's unlock ends the lockout from every source
// at once, and only for existing accounts.
func TestUnlock(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	s := f.open(adminPassword)
	if err := s.SetLockout(ctx, tenancy.LockoutPolicy{Threshold: 2, Duration: time.Hour, ResetAfter: time.Hour}); err != nil {
		t.Fatal(err)
	}
	for _, src := range []string{"192.0.2.1", "192.0.2.2"} {
		for i := 0; i < 3; i++ {
			_, _ = s.Authenticate(tenancy.AdminUser, "wrong", src)
		}
		if _, err := s.Authenticate(tenancy.AdminUser, adminPassword, src); !errors.Is(err, tenancy.ErrLocked) {
			t.Fatalf("%s not locked: %v", src, err)
		}
	}
	if err := s.Unlock(tenancy.AdminUser); err != nil || s.Locked(tenancy.AdminUser) {
		t.Fatalf("unlock: %v, still locked %v", err, s.Locked(tenancy.AdminUser))
	}
	for _, src := range []string{"192.0.2.1", "192.0.2.2"} {
		if _, err := s.Authenticate(tenancy.AdminUser, adminPassword, src); err != nil {
			t.Errorf("%s after unlock: %v", src, err)
		}
	}
	var nf *tenancy.NotFoundError
	if err := s.Unlock("nobody"); !errors.As(err, &nf) {
		t.Errorf("unlock of no account: %v", err)
	}
}

// TestUnknownTokenWithoutTheStore: a token the cache does not hold is
// looked for in the store (another replica may have opened it); when the
// store cannot be read the answer is "unavailable", not "no session", so
// the service answers 503 rather than 401. A token the cache holds still
// works.
func TestUnknownTokenWithoutTheStore(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	var down error
	s, _, err := tenancy.Open(ctx, f.st, tenancy.Options{Clock: f.clk, IdleTimeout: 30 * time.Minute, AdminPassword: adminPassword,
		CatchUp: func(context.Context) error { return down }})
	if err != nil {
		t.Fatal(err)
	}
	_, token, err := s.Login(ctx, tenancy.AdminUser, adminPassword, "192.0.2.1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.PrincipalOf(ctx, "not-a-token"); !errors.Is(err, tenancy.ErrNoSession) {
		t.Fatalf("unknown token with the store up: %v, want ErrNoSession", err)
	}
	down = errors.New("connection refused")
	if _, err := s.PrincipalOf(ctx, "not-a-token"); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("unknown token with the store down: %v, want ErrUnavailable", err)
	}
	if p, err := s.PrincipalOf(ctx, token); err != nil || p.User != tenancy.AdminUser {
		t.Fatalf("known token with the store down: %+v, %v", p, err)
	}
}
