package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"rackpool/api"
	"rackpool/internal/topology"
)

// TestKillDuringManifestStorm kills `serve` with SIGKILL while clients run
// multi-stanza Compose actions (some composing two or three systems, some
// also decomposing a system an earlier action composed), with fabrics
// taking their modelled time, while others lease pooled memory from a real
// memnode and create and delete tenants and accounts; it restarts serve
// and checks that every manifest was applied whole or not at all (its
// systems all present or all absent, the systems it decomposed gone
// exactly when its new ones exist), every acknowledged manifest, lease,
// tenant and account (and deletion) is there, and no block is held twice
// by compositions, reservations or leases.
func TestKillDuringManifestStorm(t *testing.T) {
	skipShort(t)
	data := t.TempDir()
	env := []string{"RACKPOOL_ADMIN_PASSWORD=" + password}
	topo := filepath.Join(t.TempDir(), "racks.yaml")
	if err := os.WriteFile(topo, topology.GenerateRacks(10), 0o644); err != nil {
		t.Fatal(err)
	}
	type action struct {
		names     []string // the systems it composes, by name
		decompose string   // the ID of a system it tears down, or ""
		acked     bool
	}
	needs := [][]api.Need{
		{{Kind: "gpu", Count: 1}},
		{{Kind: "nvme", Count: 1}, {Kind: "memory", Capacity: "16GiB"}},
		{{Kind: "hdd", Count: 2}},
		{{Kind: "memory", Capacity: "8GiB"}, {Kind: "nic", Count: 1}},
	}
	for round := range 2 {
		srv := start(t, data, env, "--topology", topo)
		addr := srv.addr
		c := srv.client()
		startMemnode(t, srv, "--capacity", "256MiB", "--heartbeat", "500ms")
		// A first lease makes the node's block the leases' before the
		// storm's compositions could take it.
		if _, err := c.GetMemory(context.Background(), api.LeaseRequest{Size: 1 << 20, TTL: time.Hour}); err != nil {
			t.Fatal(err)
		}
		var (
			mu      sync.Mutex
			actions []*action
			nameOf  = map[string]string{} // acknowledged system ID → name
			side    = &sideEffects{leases: map[string]bool{}, tenants: map[string]bool{}, accounts: map[string]bool{}, releasedAcked: map[string]bool{}, deleteSent: map[string]bool{}}
		)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); side.leaseStorm(c, stop) }()
		go func() { defer wg.Done(); side.accountStorm(c, stop, round) }()
		for w := range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(w), uint64(round)))
				var mine []string // IDs of systems acknowledged and not yet targeted
				for i := range 100 {
					select {
					case <-stop:
						return
					default:
					}
					a := &action{}
					var stanzas []api.Stanza
					for k := range 2 + rng.IntN(2) {
						name := fmt.Sprintf("r%d-w%d-a%d-s%d", round, w, i, k)
						a.names = append(a.names, name)
						stanzas = append(stanzas, api.Stanza{ID: name, Compose: &api.ComposeRequest{Needs: needs[rng.IntN(len(needs))]}})
					}
					if len(mine) > 0 && rng.IntN(2) == 0 {
						a.decompose, mine = mine[0], mine[1:]
						stanzas = append(stanzas, api.Stanza{ID: fmt.Sprintf("r%d-w%d-a%d-d", round, w, i), Decompose: a.decompose})
					}
					mu.Lock()
					actions = append(actions, a)
					mu.Unlock()
					ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
					systems, err := c.ApplyManifest(ctx, stanzas)
					cancel()
					if err != nil {
						if isDown(err) {
							return
						}
						time.Sleep(20 * time.Millisecond) // the racks are full now and then
						continue
					}
					mu.Lock()
					a.acked = true
					for _, s := range systems {
						nameOf[s.ID] = s.Name
						mine = append(mine, s.ID)
					}
					mu.Unlock()
				}
			}()
		}
		// The kill comes once every storm has had acknowledgements (and
		// goes on), however slowly a loaded machine gets there.
		const killAfter = 10 // manifests
		progress := func() (manifests, leases, accounts int) {
			mu.Lock()
			for _, a := range actions {
				if a.acked {
					manifests++
				}
			}
			mu.Unlock()
			side.mu.Lock()
			defer side.mu.Unlock()
			return manifests, side.ackedLeases, side.ackedAccounts
		}
		for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(10 * time.Millisecond) {
			m, l, a := progress()
			if m >= killAfter && l > 0 && a > 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("round %d: after 5 minutes %d manifests, %d leases and %d accounts were acknowledged; waited for %d, 1 and 1", round, m, l, a, killAfter)
				break
			}
		}
		if err := srv.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		close(stop)
		_ = srv.cmd.Wait()
		wg.Wait()
		acked := 0
		for _, a := range actions {
			if a.acked {
				acked++
			}
		}
		t.Logf("round %d: %d manifests sent, %d acknowledged before the kill; %s", round, len(actions), acked, side)
		if acked == 0 || side.ackedLeases == 0 || side.ackedAccounts == 0 {
			t.Fatal("a storm had nothing acknowledged before the kill; the test proves nothing")
		}

		srv = startAt(t, addr, data, env, "--topology", topo)
		c = srv.client()
		side.check(t, c)
		systems, err := c.Systems(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		present := map[string]bool{} // by name
		presentID := map[string]bool{}
		composed := systems[:0]
		for _, s := range systems {
			if s.SystemType == "Composed" {
				present[s.Name] = true
				presentID[s.ID] = true
				composed = append(composed, s)
			}
		}
		targeted := map[string]bool{} // names some later manifest tried to decompose
		for _, a := range actions {
			if a.decompose != "" {
				targeted[nameOf[a.decompose]] = true
			}
		}
		for _, a := range actions {
			var in, kept int
			for _, n := range a.names {
				if targeted[n] {
					continue
				}
				kept++
				if present[n] {
					in++
				}
			}
			if in != 0 && in != kept {
				t.Errorf("manifest %v half applied: %d of its %d systems exist", a.names, in, kept)
			}
			if a.acked && in != kept {
				t.Errorf("acknowledged manifest %v lost: %d of its %d systems exist", a.names, in, kept)
			}
			if a.decompose != "" && kept > 0 && in == kept == presentID[a.decompose] {
				t.Errorf("manifest %v (applied: %v) and the system it decomposes, %s (present: %v), disagree",
					a.names, in == kept, a.decompose, presentID[a.decompose])
			}
		}
		checkConsistent(t, take(t, c), maxCompositions(t, c))
		// Start the next round on empty racks (the leases and accounts
		// stay: the next round adds to them).
		for _, s := range composed {
			if err := c.Decompose(context.Background(), s.ID); err != nil {
				t.Fatalf("decompose %s: %v", s.ID, err)
			}
		}
		srv.kill()
	}
}

// sideEffects are the storm's other writers: memory leases and tenancy
// changes, with what each had acknowledged when serve was killed.
type sideEffects struct {
	mu                         sync.Mutex
	leases                     map[string]bool // acknowledged lease ID → still expected (false: release sent)
	tenants                    map[string]bool
	accounts                   map[string]bool // → false: deletion acknowledged
	releasedAcked              map[string]bool // releases acknowledged
	deleteSent                 map[string]bool // account deletions sent, answered or not
	ackedLeases, ackedAccounts int
}

func (s *sideEffects) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fmt.Sprintf("%d leases, %d tenants, %d accounts acknowledged", len(s.leases), len(s.tenants), len(s.accounts))
}

// leaseStorm grants leases and releases some of them until stop or until
// serve is gone.
func (s *sideEffects) leaseStorm(c *api.Client, stop <-chan struct{}) {
	var mine []string
	for i := range 20000 { // bounded; the kill comes long before
		select {
		case <-stop:
			return
		case <-time.After(2 * time.Millisecond):
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if i%4 == 3 && len(mine) > 0 {
			// A release in flight at the kill may or may not be applied:
			// from here on either state is right, and after an
			// acknowledgement the lease must not be Active.
			id := mine[0]
			s.mu.Lock()
			s.leases[id] = false
			s.mu.Unlock()
			err := c.ReleaseLease(ctx, id)
			cancel()
			if err != nil {
				if isDown(err) {
					return
				}
				continue
			}
			mine = mine[1:]
			s.mu.Lock()
			s.releasedAcked[id] = true
			s.mu.Unlock()
			continue
		}
		l, err := c.GetMemory(ctx, api.LeaseRequest{Size: 256 << 10, TTL: time.Hour})
		cancel()
		if err != nil {
			if isDown(err) {
				return
			}
			time.Sleep(20 * time.Millisecond)
			continue
		}
		mine = append(mine, l.ID)
		s.mu.Lock()
		s.leases[l.ID] = true
		s.ackedLeases++
		s.mu.Unlock()
	}
}

// accountStorm creates tenants with an account each and deletes some of
// the accounts, until stop or until serve is gone.
func (s *sideEffects) accountStorm(c *api.Client, stop <-chan struct{}, round int) {
	var mine []string
	for i := range 400 {
		select {
		case <-stop:
			return
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		tenant, user := fmt.Sprintf("t%d-%d", round, i), fmt.Sprintf("u%d-%d", round, i)
		var err error
		switch {
		case i%3 == 2 && len(mine) > 0:
			user = mine[0]
			s.mu.Lock()
			s.deleteSent[user] = true
			s.mu.Unlock()
			if _, err = c.Do(ctx, "DELETE", "/redfish/v1/AccountService/Accounts/"+user, nil, nil); err == nil {
				mine = mine[1:]
				s.mu.Lock()
				s.accounts[user] = false
				s.mu.Unlock()
			}
		default:
			if _, err = c.Do(ctx, "POST", "/redfish/v1/AccountService/Oem/Rackpool/Tenants", map[string]any{"Id": tenant, "Quotas": map[string]int{"gpu": 2}}, nil); err != nil {
				break
			}
			s.mu.Lock()
			s.tenants[tenant] = true
			s.mu.Unlock()
			if _, err = c.Do(ctx, "POST", "/redfish/v1/AccountService/Accounts", map[string]any{"UserName": user, "Password": "storm-password",
				"RoleId": "Operator", "Oem": map[string]any{"Rackpool": map[string]any{"Tenant": tenant}}}, nil); err == nil {
				mine = append(mine, user)
				s.mu.Lock()
				s.accounts[user] = true
				s.ackedAccounts++
				s.mu.Unlock()
			}
		}
		cancel()
		if err != nil && isDown(err) {
			return
		}
	}
}

// check asserts every acknowledged lease, tenant and account change
// survived the kill.
func (s *sideEffects) check(t *testing.T, c *api.Client) {
	t.Helper()
	ctx := context.Background()
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, live := range s.leases {
		l, err := c.Lease(ctx, id)
		switch {
		case live && (err != nil || l.State != "Active"):
			t.Errorf("acknowledged lease %s after the restart: %+v, %v", id, l, err)
		case !live && s.releasedAcked[id] && err == nil && l.State == "Active":
			t.Errorf("lease %s is Active after its release was acknowledged", id)
		}
	}
	for id := range s.tenants {
		if _, err := c.Do(ctx, "GET", "/redfish/v1/AccountService/Oem/Rackpool/Tenants/"+id, nil, nil); err != nil {
			t.Errorf("acknowledged tenant %s after the restart: %v", id, err)
		}
	}
	for user, live := range s.accounts {
		_, err := c.Do(ctx, "GET", "/redfish/v1/AccountService/Accounts/"+user, nil, nil)
		// A deletion whose answer the kill cut off may have been
		// committed: then either state is right.
		if live && err != nil && !s.deleteSent[user] {
			t.Errorf("acknowledged account %s after the restart: %v", user, err)
		}
		if !live && err == nil {
			t.Errorf("account %s is back after its deletion was acknowledged", user)
		}
	}
}
