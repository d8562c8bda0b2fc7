package storetest

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"rackpool/internal/childproc"
	"rackpool/internal/inventory"
	"rackpool/internal/store"
)

// CrashChild is the body of a backend's crash child test (the process
// Crash starts and kills): it applies plans to s from eight goroutines and
// appends audit entries from a ninth until it is killed, printing each
// acknowledged change on stdout. After an error a goroutine prints it and
// keeps going (Crash decides whether errors are allowed).
func CrashChild(s store.Store) {
	var mu sync.Mutex
	ack := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		os.Stdout.WriteString(fmt.Sprintf(format, args...) + "\n")
	}
	ctx := context.Background()
	fmt.Println("ready")
	for w := range 8 {
		go func() {
			for i := 0; ; i++ {
				id := fmt.Sprintf("p%d-w%d-%06d", os.Getpid(), w, i)
				c := comp(id, "h-"+id, "b-"+id)
				// Half the writers make the first record an intent: an
				// acknowledged intent must survive the process's crash too.
				if err := s.Apply(ctx, store.Plan{Put: []*inventory.Composition{c}, Intent: w%2 == 0}); err != nil {
					ack("error %s: %v", id, err)
					continue
				}
				ack("put %s 1", id)
				c2 := c.Clone()
				c2.Version = 2
				c2.Adding = []string{"a-" + id}
				if err := s.Apply(ctx, store.Plan{Put: []*inventory.Composition{c2}}); err != nil {
					ack("error %s: %v", id, err)
					continue
				}
				ack("put %s 2", id)
				if i%3 == 0 {
					if err := s.Apply(ctx, store.Plan{Delete: []store.Deletion{{ID: id, Version: 2}}}); err != nil {
						ack("error %s: %v", id, err)
						continue
					}
					ack("del %s", id)
				}
			}
		}()
	}
	go func() {
		for i := 0; ; i++ {
			target := fmt.Sprintf("/p%d/%06d", os.Getpid(), i)
			e, err := s.AppendAudit(ctx, store.AuditEntry{Time: time.Now(), User: "crash", Target: target, Outcome: store.AuditSuccess})
			if err != nil {
				ack("error audit %s: %v", target, err)
				continue
			}
			ack("audit %d %s", e.ID, target)
		}
	}()
	select {} // until killed
}

// killAfter is how many acknowledged changes Crash waits for before it
// kills the child.
const killAfter = 50

// CrashConfig describes a backend's crash test.
type CrashConfig struct {
	// ChildTest is the test function that opens the backend and calls
	// CrashChild; Env ("NAME=value") tells it where the store is.
	ChildTest string
	Env       string
	// Open reopens the store after a round, for the checks.
	Open func(t *testing.T) store.Store
	// Check, when set, checks the backend's own consistency after a
	// round, before Open.
	Check func(t *testing.T)
	// Crash, when set, is called instead of killing only the child: a
	// backend whose server is another process crashes it too (and starts
	// it again); it runs on its own goroutine, so it reports with t.Error,
	// never t.Fatal. The child is killed afterwards; errors it reported after
	// Crash began are expected and ignored.
	Crash func(t *testing.T)
	// Rounds is how many child processes are killed (default 3).
	Rounds int
}

// Crash starts the child test, kills it (with SIGKILL, after cfg.Crash if
// set) once it has acknowledged killAfter changes, audit entries among them
// (however slowly a loaded machine gets there), and checks that every
// change it acknowledged survived: compositions at their acknowledged
// version or later, deletions gone, audit entries under their IDs.
func Crash(t *testing.T, cfg CrashConfig) {
	if cfg.Rounds == 0 {
		cfg.Rounds = 3
	}
	for round := range cfg.Rounds {
		cmd := childproc.Command(os.Args[0], "-test.run=^"+cfg.ChildTest+"$", "-test.count=1")
		cmd.Env = append(os.Environ(), cfg.Env)
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		type ackState struct {
			version int64
			deleted bool
		}
		acked := map[string]*ackState{}
		auditAcked := map[int64]string{} // ID → target
		lines := make(chan string)
		go func() {
			defer close(lines)
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				lines <- sc.Text()
			}
		}()
		var (
			ready    bool
			armed    bool          // kill was made ready, once
			kill     chan struct{} // nil until armed, then closed
			count    int
			crashing bool
			errs     int
		)
		arm := func() {
			if ready && !armed && count >= killAfter && len(auditAcked) > 0 {
				armed = true
				kill = make(chan struct{})
				close(kill)
			}
		}
		record := func(line string) {
			f := strings.Fields(line)
			switch {
			case len(f) == 1 && f[0] == "ready":
				ready = true
			case len(f) == 3 && f[0] == "put":
				v, _ := strconv.ParseInt(f[2], 10, 64)
				if acked[f[1]] == nil {
					acked[f[1]] = &ackState{}
				}
				acked[f[1]].version = v
				count++
			case len(f) == 3 && f[0] == "audit":
				id, _ := strconv.ParseInt(f[1], 10, 64)
				auditAcked[id] = f[2]
				count++
			case len(f) == 2 && f[0] == "del":
				acked[f[1]].deleted = true
				count++
			case len(f) > 0 && f[0] == "error":
				if errs++; !crashing && errs <= 10 {
					t.Errorf("child: %s", line)
				}
			}
			arm()
		}
		deadline := time.After(5 * time.Minute)
	read:
		for {
			select {
			case line, ok := <-lines:
				if !ok {
					break read
				}
				record(line)
			case <-kill:
				kill = nil
				if cfg.Crash != nil {
					// Keep reading the child's acknowledgements while the
					// backend crashes: they must survive it.
					crashing = true
					done := make(chan struct{})
					go func() {
						defer close(done)
						cfg.Crash(t)
					}()
				crash:
					for {
						select {
						case line, ok := <-lines:
							if !ok {
								break crash
							}
							record(line)
						case <-done:
							break crash
						}
					}
				}
				cmd.Process.Signal(syscall.SIGKILL)
			case <-deadline:
				cmd.Process.Signal(syscall.SIGKILL)
				t.Fatalf("round %d: after 5 minutes the child was ready: %v, with %d changes and %d audit entries acknowledged; waited for %d changes with an audit entry among them",
					round, ready, count, len(auditAcked), killAfter)
			}
		}
		err = cmd.Wait()
		if ee, ok := err.(*exec.ExitError); !ok || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("child exited with %v, want killed", err)
		}
		if count == 0 {
			t.Fatal("child acknowledged nothing")
		}
		t.Logf("round %d: %d acknowledged changes, %d errors", round, count, errs)

		if cfg.Check != nil {
			cfg.Check(t)
		}
		s := cfg.Open(t)
		cs, err := s.Compositions(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		audited := map[int64]string{}
		for q := (store.AuditQuery{Limit: store.MaxAuditLimit}); ; {
			page, err := s.Audit(context.Background(), q)
			if err != nil {
				t.Fatal(err)
			}
			if len(page) == 0 {
				break
			}
			for _, e := range page {
				audited[e.ID] = e.Target
			}
			q.AfterID = page[len(page)-1].ID
		}
		s.Close()
		if len(auditAcked) == 0 {
			t.Error("child acknowledged no audit entry")
		}
		for id, target := range auditAcked {
			if got, ok := audited[id]; !ok || got != target {
				t.Errorf("audit entry %d (%s) acknowledged, stored %q, %v", id, target, got, ok)
			}
		}
		stored := map[string]int64{}
		for _, c := range cs {
			stored[c.ID] = c.Version
		}
		for id, a := range acked {
			v, ok := stored[id]
			switch {
			case a.deleted && ok:
				t.Errorf("%s: deletion acknowledged but stored at version %d", id, v)
			case a.deleted:
			case !ok:
				// Every third composition is deleted after version 2; that
				// deletion may have committed without being acknowledged.
				var pid, w, i int
				fmt.Sscanf(id, "p%d-w%d-%d", &pid, &w, &i)
				if a.version < 2 || i%3 != 0 {
					t.Errorf("%s: version %d acknowledged but missing", id, a.version)
				}
			case v < a.version:
				t.Errorf("%s: version %d acknowledged, %d stored", id, a.version, v)
			}
		}
	}
}
