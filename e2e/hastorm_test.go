package e2e

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/jackc/pgx/v5"

	"rackpool/api"
	"rackpool/internal/replica/alloctest"
)

// haSlot is one machine of the fault storm: a replica (serving or standby)
// reaching the database through a proxy the test controls.
type haSlot struct {
	proxy *tcpProxy
	mu    sync.Mutex
	srv   *server
}

func (s *haSlot) get() *server {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.srv
}

func (s *haSlot) set(srv *server) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.srv = srv
}

// serving reports whether srv has served (it may have died since: a
// client then gets its connection refused and tries the next).
func serving(srv *server) bool {
	return srv != nil && strings.Contains(srv.stderr.String(), "rackpool serving")
}

// TestPostgresFaultStorm: three replicas of one PostgreSQL database (one
// serving, two standbys, each through a proxy the test controls) and a
// fabric manager shared by all (fabric-emulator) under clients composing
// and decomposing, each sending to whichever replica answers, while the
// test kills -9 the serving replica, pauses the next one (SIGSTOP), cuts
// the third from the database, and crashes PostgreSQL itself; each
// replica that left is started again as a standby. Afterwards: every
// system is Composed, no block is in two systems, every acknowledged
// change is there, the fabric manager holds exactly what the store says,
// and the history of acknowledged operations is linearizable.
func TestPostgresFaultStorm(t *testing.T) { faultStorm(t, false) }

// TestPostgresActiveFaultStorm is the same storm on three active replicas,
// every one answering, on fabric managers for every fabric: the test kills
// -9 the leader, pauses the next leader until it is evicted, cuts the
// next from the database until it is evicted, and crashes PostgreSQL; each
// replica that left is started again, active.
func TestPostgresActiveFaultStorm(t *testing.T) { faultStorm(t, true) }

func faultStorm(t *testing.T, active bool) {
	skipShort(t)
	pg, url := startPostgres(t)
	fms := []*fabricEmulator{startFabricEmulator(t, "falcon1", "--fabric-time", "instant")}
	if active {
		fms = sharedFabrics(t, "instant")
	}
	fm := fms[0]
	topo := redfishRack(t, fms...)
	env := append([]string{"RACKPOOL_ADMIN_PASSWORD=" + password}, fmEnv(fms...)...)
	flags := []string{"--topology", topo, "--fabric-time", "instant"}
	slots := make([]*haSlot, 3)
	for i := range slots {
		slots[i] = &haSlot{proxy: startProxy(t, pg.Addr())}
	}
	storeOf := func(s *haSlot) string { return strings.Replace(url, pg.Addr(), s.proxy.addr(), 1) }
	// Every replica's log goes to $RACKPOOL_E2E_LOGS, when set, if the
	// test fails.
	var all []*server
	t.Cleanup(func() {
		if dir := os.Getenv("RACKPOOL_E2E_LOGS"); dir != "" && t.Failed() {
			for i, srv := range all {
				_ = os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s-%d.log", t.Name(), i)), []byte(srv.stderr.String()), 0o600)
			}
		}
	})
	// launchSlot starts slot i's replica: active, or a standby.
	launchSlot := func(i int) *server {
		var srv *server
		if active {
			srv = start(t, t.TempDir(), env, append([]string{"--store", storeOf(slots[i]), "--active"}, flags...)...)
		} else {
			srv = startStandby(t, storeOf(slots[i]), env, flags...)
		}
		all = append(all, srv)
		return srv
	}
	if active {
		for i := range slots {
			slots[i].set(launchSlot(i))
		}
	} else {
		slots[0].set(start(t, t.TempDir(), env, append([]string{"--store", storeOf(slots[0])}, flags...)...))
		all = append(all, slots[0].get())
		for i := range slots[1:] {
			slots[i+1].set(launchSlot(i + 1))
		}
	}
	// With active replicas a fourth one, which the test leaves alone,
	// is the control plane of a memory node (a memnode heartbeats to one
	// URL): memory leases are served by the leader, whichever it is.
	var quiet *server
	if active {
		quiet = start(t, t.TempDir(), env, append([]string{"--store", url, "--active"}, flags...)...)
		all = append(all, quiet)
		startMemnode(t, quiet, "--capacity", "256MiB", "--heartbeat", "500ms")
	}
	// leading: the serving replica, or with active ones the leader.
	leading := func(srv *server) bool { return serving(srv) && (!active || leads(srv)) }
	// replica i: a slot's replica, or (i = len(slots)) the quiet one.
	replica := func(i int) *server {
		if i == len(slots) {
			return quiet
		}
		return slots[i].get()
	}
	// leader returns the slot whose replica leads, or else (the quiet
	// replica leads) slot def.
	leader := func(def int) int {
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			for i := range len(slots) + 1 {
				if srv := replica(i); srv != nil && leading(srv) {
					if i == len(slots) {
						return def
					}
					return i
				}
			}
		}
		t.Fatal("no replica leads")
		return -1
	}
	// waitLeader waits until a replica other than old leads.
	waitLeader := func(old int, what string) int {
		t.Helper()
		start := time.Now()
		for deadline := start.Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			for i := range len(slots) + 1 {
				if srv := replica(i); srv != nil && i != old && leading(srv) {
					t.Logf("%s: replica %d leads after %s", what, i, time.Since(start).Round(time.Millisecond))
					return i
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: no replica took over", what)
			}
		}
	}
	// waitEvicted waits until the leader has evicted slot old's replica.
	waitEvicted := func(old int, what string) {
		t.Helper()
		if !active {
			return
		}
		start := time.Now()
		want := `msg="evicted a dead replica" replica=member/` + replicaTag(t, slots[old].get())
		for deadline := start.Add(40 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			for i := range len(slots) + 1 {
				if srv := replica(i); srv != nil && strings.Contains(srv.stderr.String(), want) {
					t.Logf("%s: replica %d evicted after %s", what, old, time.Since(start).Round(time.Millisecond))
					return
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: replica %d was not evicted", what, old)
			}
		}
	}
	// restart starts slot i again once its process is gone.
	restart := func(i int) {
		t.Helper()
		old := slots[i].get()
		if err := waitExit(old, 30*time.Second); err != nil {
			t.Fatalf("replica %d: %v", i, err)
		}
		slots[i].set(launchSlot(i))
	}

	// Clients: each sends to every replica in turn until one answers.
	var (
		mu      sync.Mutex
		history []porcupine.Operation
		acked   = map[string][]string{} // live acknowledged systems
		gone    = map[string]bool{}     // acknowledged decomposed
		unsure  = map[string]bool{}     // decompose sent, outcome unknown
		counts  = map[string]int{}
	)
	record := func(client int, call time.Time, in alloctest.Op, ok bool) {
		mu.Lock()
		defer mu.Unlock()
		history = append(history, porcupine.Operation{ClientId: client, Input: in, Call: call.UnixNano(),
			Output: alloctest.Result{OK: ok}, Return: time.Now().UnixNano()})
	}
	// send runs op at the serving replica: an answer (nil or an API error)
	// or, when no replica answered within the deadline, the last error.
	// lost reports whether an earlier attempt went unanswered (it may have
	// been carried out: a retried decompose then finds nothing).
	trace := map[string][]string{} // id -> what each attempt got
	note := func(id, what string) {
		mu.Lock()
		defer mu.Unlock()
		trace[id] = append(trace[id], time.Now().Format("05.000")+" "+what)
	}
	send := func(id string, op func(c *api.Client, ctx context.Context) error) (lost bool, err error) {
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			first := rand.IntN(len(slots)) // active replicas all answer: spread the load
			for k := range slots {
				i := (first + k) % len(slots)
				srv := slots[i].get()
				if !serving(srv) {
					continue
				}
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				err = op(srv.client(), ctx)
				cancel()
				if id != "" {
					note(id, fmt.Sprintf("replica %d: %v", i, err))
				}
				var ae *api.Error
				if err == nil || errors.As(err, &ae) && ae.Status != http.StatusServiceUnavailable {
					return lost, err
				}
				if !errors.As(err, &ae) && !errors.Is(err, syscall.ECONNREFUSED) {
					lost = true // sent, unanswered: it may have been carried out
				}
			}
		}
		return lost, err
	}
	needs := [][]api.Need{{{Kind: "gpu", Count: 1}}, {{Kind: "nvme", Count: 1}}, {{Kind: "gpu", Count: 1}, {Kind: "nvme", Count: 1}}}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for c := range 4 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(c), 20))
			var mine []string
			// Systems whose decompose was sent and went unanswered: it
			// may have been carried out, so a 404 later means done.
			sentBefore := map[string]bool{}
			firstCall := map[string]time.Time{} // the first decompose sent, per system
			for {
				select {
				case <-stop:
					return
				default:
				}
				call := time.Now()
				if len(mine) > 0 && rng.IntN(2) == 0 {
					id := mine[0]
					mine = mine[1:]
					if first, ok := firstCall[id]; ok {
						call = first // an earlier attempt may be the one that took effect
					}
					lost, err := send(id, func(cl *api.Client, ctx context.Context) error { return cl.Decompose(ctx, id) })
					if lost {
						sentBefore[id] = true
					}
					if _, ok := firstCall[id]; !ok {
						firstCall[id] = call
					}
					var ae *api.Error
					if errors.As(err, &ae) && ae.Status == http.StatusNotFound && sentBefore[id] {
						// An earlier attempt was carried out without
						// an answer: the decompose happened, before now.
						err = nil
					}
					mu.Lock()
					switch {
					case err == nil:
						delete(acked, id)
						gone[id] = true
						counts["decomposed"]++
					case errors.As(err, &ae) && ae.Status == http.StatusNotFound:
						var logs []string
						for i, s := range slots {
							for _, line := range strings.Split(s.get().stderr.String(), "\n") {
								if strings.Contains(line, id) {
									logs = append(logs, fmt.Sprintf("replica %d: %s", i, line))
								}
							}
						}
						t.Errorf("acknowledged system %s not found at its first decompose; attempts:\n%s\nthe logs say:\n%s", id, strings.Join(trace[id], "\n"), strings.Join(logs, "\n"))
					case errors.As(err, &ae) && (ae.Status == http.StatusServiceUnavailable || ae.Status == http.StatusConflict):
						counts["decompose refused"]++
						mine = append(mine, id) // still there: try again later
					default:
						unsure[id] = true
						delete(acked, id)
						counts["decompose unknown"]++
					}
					mu.Unlock()
					switch {
					case err == nil:
						record(c, call, alloctest.Op{ID: id}, true)
					case !errors.As(err, &ae) || ae.Status == http.StatusInternalServerError:
						// Its outcome is unknown: it may take effect at
						// any time from its call on.
						mu.Lock()
						history = append(history, porcupine.Operation{ClientId: c, Input: alloctest.Op{ID: id}, Call: call.UnixNano(),
							Output: alloctest.Result{OK: true}, Return: math.MaxInt64})
						mu.Unlock()
					}
					continue
				}
				var sys *api.System
				_, err := send("", func(cl *api.Client, ctx context.Context) error {
					var err error
					sys, err = cl.Compose(ctx, api.ComposeRequest{Needs: needs[rng.IntN(len(needs))]})
					return err
				})
				var ae *api.Error
				switch {
				case err == nil:
					var blocks []string
					for _, b := range sys.Links.ResourceBlocks {
						blocks = append(blocks, b.Last())
					}
					slices.Sort(blocks)
					mu.Lock()
					acked[sys.ID] = blocks
					counts["composed"]++
					mu.Unlock()
					mine = append(mine, sys.ID)
					record(c, call, alloctest.Op{Compose: true, ID: sys.ID, Blocks: blocks}, true)
				case errors.As(err, &ae) && ae.Status/100 == 4:
					record(c, call, alloctest.Op{Compose: true}, false)
					mu.Lock()
					counts["compose refused"]++
					mu.Unlock()
					time.Sleep(20 * time.Millisecond)
				default:
					mu.Lock()
					counts["compose unknown"]++
					mu.Unlock()
				}
			}
		})
	}

	// With active replicas, a client of memory leases and one of accounts
	// send to random replicas too: the leader serves leases whichever
	// replica is asked; accounts are every replica's.
	leases, accounts := map[string]bool{}, map[string]bool{} // acknowledged: live, or released/deleted
	// churn adds (add) and removes (remove) records until the storm
	// stops, noting in acked what was acknowledged: true live, false
	// removed. A removal whose attempt went unanswered may have been
	// carried out: its record is judged neither way.
	churn := func(acked map[string]bool, what string, add func(ctx context.Context, cl *api.Client, i int) (string, error), remove func(ctx context.Context, cl *api.Client, id string) error) {
		var mine []string
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			if i%3 == 2 && len(mine) > 0 {
				id := mine[0]
				lost, err := send("", func(cl *api.Client, ctx context.Context) error { return remove(ctx, cl, id) })
				mu.Lock()
				switch {
				case err == nil:
					acked[id] = false
					counts[what+" removed"]++
					mine = mine[1:]
				case lost:
					delete(acked, id)
					mine = mine[1:]
				}
				mu.Unlock()
				continue
			}
			var id string
			if _, err := send("", func(cl *api.Client, ctx context.Context) error {
				var err error
				id, err = add(ctx, cl, i)
				return err
			}); err == nil {
				mine = append(mine, id)
				mu.Lock()
				acked[id] = true
				counts[what+" added"]++
				mu.Unlock()
			}
		}
	}
	if active {
		wg.Go(func() {
			churn(leases, "leases", func(ctx context.Context, cl *api.Client, _ int) (string, error) {
				l, err := cl.GetMemory(ctx, api.LeaseRequest{Size: 256 << 10, TTL: time.Hour})
				if err != nil {
					return "", err
				}
				return l.ID, nil
			}, func(ctx context.Context, cl *api.Client, id string) error { return cl.ReleaseLease(ctx, id) })
		})
		wg.Go(func() {
			churn(accounts, "accounts", func(ctx context.Context, cl *api.Client, i int) (string, error) {
				user := fmt.Sprintf("storm-%d", i)
				_, err := cl.Do(ctx, "POST", "/redfish/v1/AccountService/Accounts", map[string]any{"UserName": user, "Password": "storm-password-1", "RoleId": "Operator"}, nil)
				return user, err
			}, func(ctx context.Context, cl *api.Client, user string) error {
				_, err := cl.Do(ctx, "DELETE", "/redfish/v1/AccountService/Accounts/"+user, nil, nil)
				return err
			})
		})
	}
	pause := func() { time.Sleep(1500 * time.Millisecond) }
	pause()
	// 1. kill -9 of the leader.
	l := leader(0)
	slots[l].get().kill()
	waitLeader(l, "kill -9")
	waitEvicted(l, "kill -9")
	restart(l)
	pause()
	// 2. SIGSTOP of the leader; resumed, it must exit.
	l = leader(1)
	stopped := slots[l].get()
	if err := stopped.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	waitLeader(l, "SIGSTOP")
	waitEvicted(l, "SIGSTOP")
	if err := stopped.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	restart(l)
	pause()
	// 3. The leader cut from the database.
	l = leader(2)
	slots[l].proxy.cut()
	waitLeader(l, "cut from the database")
	waitEvicted(l, "cut from the database")
	slots[l].proxy.restore()
	restart(l)
	pause()
	// 4. PostgreSQL crashes and restarts.
	if err := pg.Stop("immediate"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if err := pg.Start(); err != nil {
		t.Fatal(err)
	}
	pause()
	close(stop)
	wg.Wait()
	if active {
		// A crash of the database ends every session: each replica
		// takes its membership again within the grace, and none is
		// evicted for it.
		for i, sl := range slots {
			if log := sl.get().stderr.String(); strings.Contains(log, "exiting") {
				t.Errorf("replica %d exited after the database's crash:\n%s", i, log)
			}
		}
	}
	t.Logf("operations: %v", counts)
	if counts["composed"] == 0 || counts["decomposed"] == 0 {
		t.Fatal("no compose or decompose was acknowledged: the storm proves nothing")
	}

	// The replica that serves now (after the database's crash the serving
	// replica may have taken its lead again, or a standby may have).
	var c *api.Client
	for deadline := time.Now().Add(30 * time.Second); c == nil; time.Sleep(50 * time.Millisecond) {
		for _, s := range slots {
			if srv := s.get(); serving(srv) {
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				_, err := srv.client().Systems(ctx)
				cancel()
				if err == nil {
					c = srv.client()
					break
				}
			}
		}
		if c == nil && time.Now().After(deadline) {
			t.Fatal("no replica serves after the storm")
		}
	}
	// A workflow the database's crash interrupted is finished within
	// seconds on a quiet machine (RetryStuck, every second, once the
	// database is back); one still in transition after 2 minutes, however
	// loaded the machine, is stuck.
	settled := time.Now()
	for deadline := settled.Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		systems, err := c.Systems(ctx)
		cancel()
		if err != nil {
			continue
		}
		if !slices.ContainsFunc(systems, func(s api.System) bool {
			return s.SystemType == "Composed" && s.Oem.Rackpool.CompositionState != "Composed"
		}) {
			break
		}
	}
	if d := time.Since(settled); d > 200*time.Millisecond {
		t.Logf("the systems in transition after the storm settled within %s", d.Round(100*time.Millisecond))
	}
	// A system still in transition: what each replica logged of it.
	if systems, err := c.Systems(context.Background()); err == nil {
		for _, sys := range systems {
			if sys.SystemType != "Composed" || sys.Oem.Rackpool.CompositionState == "Composed" {
				continue
			}
			for i, sl := range slots {
				for _, line := range lines(sl.get().stderr.String()) {
					if strings.Contains(line, sys.ID) {
						t.Logf("replica %d on %s: %s", i, sys.ID, line)
					}
				}
			}
		}
	}
	snap := take(t, c)
	checkConsistent(t, snap, maxCompositions(t, c))
	// Every acknowledged lease and account change is there.
	ctx := context.Background()
	for id, live := range leases {
		l, err := c.Lease(ctx, id)
		switch {
		case live && (err != nil || l.State != "Active"):
			t.Errorf("acknowledged lease %s after the storm: %+v, %v", id, l, err)
		case !live && err == nil && l.State == "Active":
			t.Errorf("lease %s is Active after its release was acknowledged", id)
		}
	}
	for user, live := range accounts {
		_, err := c.Do(ctx, "GET", "/redfish/v1/AccountService/Accounts/"+user, nil, nil)
		if live && err != nil {
			t.Errorf("acknowledged account %s after the storm: %v", user, err)
		}
		if !live && err == nil {
			t.Errorf("account %s is back after its deletion was acknowledged", user)
		}
	}
	if active && (counts["leases added"] == 0 || counts["accounts added"] == 0) {
		t.Errorf("no lease or no account change was acknowledged: %v", counts)
	}
	for id, blocks := range acked {
		if got, ok := snap.systems[id]; !ok {
			t.Errorf("acknowledged system %s lost; the database says: %s", id, dbSays(t, url, id))
		} else if slices.Sort(got); !slices.Equal(got, blocks) {
			t.Errorf("system %s holds %v, acknowledged with %v", id, got, blocks)
		}
	}
	for id := range gone {
		if _, ok := snap.systems[id]; ok {
			t.Errorf("acknowledged decomposed system %s is back", id)
		}
	}
	// The fabric manager holds exactly what the store says, per host.
	want := map[string][]string{}
	for _, blocks := range snap.systems {
		host := ""
		for _, b := range blocks {
			if strings.HasPrefix(b, "host") {
				host = b
			}
		}
		for _, b := range blocks {
			if b != host {
				want[host] = append(want[host], b)
			}
		}
	}
	for _, h := range []string{"host1", "host2", "host3", "host4"} {
		got := slices.DeleteFunc(fm.zoneMembers(t, "falcon1", h+"-pcie"), func(m string) bool { return m == h+"-pcie" })
		w := want[h]
		slices.Sort(w)
		if !slices.Equal(got, w) {
			t.Errorf("fabric zone of %s holds %v, the store says %v", h, got, w)
		}
	}
	res, _ := porcupine.CheckOperationsVerbose(alloctest.Model, history, 60*time.Second)
	if res != porcupine.Ok {
		t.Errorf("the history of %d acknowledged operations is not linearizable (%v)", len(history), res)
		// Name a compose that took a block another acknowledged system
		// held and had not been freed of before the compose began.
		for _, a := range history {
			ia := a.Input.(alloctest.Op)
			if !ia.Compose || !a.Output.(alloctest.Result).OK {
				continue
			}
			for _, b := range history {
				ib := b.Input.(alloctest.Op)
				if !ib.Compose || !b.Output.(alloctest.Result).OK || ib.ID == ia.ID || b.Return > a.Call || !slices.ContainsFunc(ib.Blocks, func(x string) bool { return slices.Contains(ia.Blocks, x) }) {
					continue
				}
				freed := false
				for _, d := range history {
					if id := d.Input.(alloctest.Op); !id.Compose && id.ID == ib.ID && d.Output.(alloctest.Result).OK && d.Call < a.Return {
						freed = true
					}
				}
				if !freed {
					t.Errorf("%s %v (%d-%d) took blocks of %s %v (acknowledged at %d), not decomposed before", ia.ID, ia.Blocks, a.Call, a.Return, ib.ID, ib.Blocks, b.Return)
				}
			}
		}
	}
}

// waitExit waits until srv's process has ended (killed, or exited after
// losing the lead), up to within.
func waitExit(srv *server, within time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- srv.cmd.Wait() }()
	select {
	case <-done:
		return nil
	case <-time.After(within):
		return fmt.Errorf("still running after %s:\n%s", within, srv.stderr)
	}
}

// dbSays describes what the database holds of composition id: its record
// and its audit entries.
func dbSays(t *testing.T, url, id string) string {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err.Error()
	}
	defer conn.Close(ctx)
	var out []string
	var v int64
	var state string
	if err := conn.QueryRow(ctx, `SELECT version, state FROM compositions WHERE id = $1`, id).Scan(&v, &state); err == nil {
		out = append(out, fmt.Sprintf("record at version %d, %s", v, state))
	} else {
		out = append(out, "no record")
	}
	rows, err := conn.Query(ctx, `SELECT username, method, target, outcome, status, detail FROM audit WHERE detail LIKE '%' || $1 || '%' OR target LIKE '%' || $1 ORDER BY id`, id)
	if err == nil {
		for rows.Next() {
			var u, m, tg, o, d string
			var st int
			if rows.Scan(&u, &m, &tg, &o, &st, &d) == nil {
				out = append(out, fmt.Sprintf("audit: %s %s %s %d %q", m, tg, o, st, d))
			}
		}
		rows.Close()
	}
	var changes int
	conn.QueryRow(ctx, `SELECT COUNT(*) FROM changes WHERE id = $1`, id).Scan(&changes)
	out = append(out, fmt.Sprintf("%d change log rows", changes))
	return strings.Join(out, "; ")
}
