package demand

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The test binary doubles as the recorded command: with helperEnv set it
// runs a helper instead of the tests.
const helperEnv = "DEMAND_TEST_HELPER"

func TestMain(m *testing.M) {
	if h := os.Getenv(helperEnv); h != "" {
		os.Exit(runHelper(h))
	}
	os.Exit(m.Run())
}

// runHelper runs the helper named h:
//   - steps: allocate 64 MiB, then 128 MiB, then start a child holding
//     128 MiB more, wait for it and exit;
//   - child: hold 128 MiB for a second;
//   - exit3: exit with status 3 after 300 ms;
//   - sleeper: start a child sleeper, write its PID to $DEMAND_TEST_PIDFILE
//     and sleep a minute (the child just sleeps).
func runHelper(h string) int {
	switch h {
	case "steps":
		a := touch(64 << 20)
		time.Sleep(700 * time.Millisecond)
		b := touch(64 << 20)
		time.Sleep(700 * time.Millisecond)
		c := helperCmd("child")
		if err := c.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			return 1
		}
		runtime.KeepAlive(a)
		runtime.KeepAlive(b)
	case "child":
		c := touch(128 << 20)
		time.Sleep(time.Second)
		runtime.KeepAlive(c)
	case "exit3":
		time.Sleep(300 * time.Millisecond)
		return 3
	case "sleeper":
		if f := os.Getenv("DEMAND_TEST_PIDFILE"); f != "" {
			c := helperCmd("sleeper")
			c.Env = append(os.Environ(), "DEMAND_TEST_PIDFILE=")
			if err := c.Start(); err != nil {
				return 1
			}
			if err := os.WriteFile(f, []byte(strconv.Itoa(c.Process.Pid)), 0o644); err != nil {
				return 1
			}
		}
		time.Sleep(time.Minute)
	default:
		fmt.Fprintln(os.Stderr, "unknown helper", h)
		return 2
	}
	return 0
}

// touch allocates n bytes and writes every page, so they are resident.
func touch(n int) []byte {
	b := make([]byte, n)
	for i := 0; i < n; i += 4096 {
		b[i] = 1
	}
	return b
}

func helperCmd(name string) *exec.Cmd {
	c := exec.Command(os.Args[0], "-test.run=^$")
	c.Env = append(os.Environ(), helperEnv+"="+name)
	c.Stderr = os.Stderr
	return c
}

func skipUnlessLinux(t *testing.T) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("Record measures process trees through Linux's /proc")
	}
}

func TestRecordSeesGrowthAndChildren(t *testing.T) {
	skipUnlessLinux(t)
	var samples []Sample
	r, err := Record(context.Background(), helperCmd("steps"), RecordOptions{
		Interval: 50 * time.Millisecond,
		Entity:   "steps",
		OnSample: func(s Sample) { samples = append(samples, s) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if code := r.State.ExitCode(); code != 0 {
		t.Fatalf("exit status %d", code)
	}
	tr := r.Trace
	if err := tr.Validate(); err != nil {
		t.Fatal(err)
	}
	s := tr.Entities[0]
	if s.Entity != "steps" || s.Start != 0 || tr.Interval != 0.05 {
		t.Fatalf("entity %q start %v interval %v", s.Entity, s.Start, tr.Interval)
	}
	const mib = 1.0 / 1024
	first, peak := s.MemoryGiB[0], slices.Max(s.MemoryGiB)
	t.Logf("%d samples over %.1f s, first %.0f MiB, peak %.0f MiB, %d processes at most, %d interpolated",
		s.Len(), tr.End(&s), first/mib, peak/mib, r.PeakProcesses, r.Interpolated)
	if first > 60*mib {
		t.Errorf("first sample %.0f MiB: taken after the allocation?", first/mib)
	}
	// Parent 128 MiB and child 128 MiB at once: only the whole tree
	// reaches 250 MiB.
	if peak < 250*mib {
		t.Errorf("peak %.0f MiB, want the tree's 256 MiB and more", peak/mib)
	}
	if r.PeakProcesses < 2 {
		t.Errorf("at most %d processes in the tree, want the child counted", r.PeakProcesses)
	}
	// The steps in order: some sample between 64 and 128 MiB above the
	// start, then some between 128 and 256, then the peak.
	stage := 0
	for _, v := range s.MemoryGiB {
		grown := v - first
		switch {
		case stage == 0 && grown > 60*mib && grown < 120*mib:
			stage = 1
		case stage == 1 && grown > 125*mib && grown < 200*mib:
			stage = 2
		case stage == 2 && grown > 240*mib:
			stage = 3
		}
	}
	if stage != 3 {
		t.Errorf("steps of 64, 128 and 256 MiB not seen in order (reached stage %d)", stage)
	}
	if len(samples) != s.Len() {
		t.Errorf("OnSample called %d times for %d samples", len(samples), s.Len())
	}
	for k, smp := range samples {
		if smp.Elapsed != time.Duration(k)*50*time.Millisecond {
			t.Fatalf("sample %d at %v", k, smp.Elapsed)
		}
	}
}

func TestRecordDoesNotDrift(t *testing.T) {
	skipUnlessLinux(t)
	start := time.Now()
	r, err := Record(context.Background(), helperCmd("exit3"), RecordOptions{Interval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	if code := r.State.ExitCode(); code != 3 {
		t.Fatalf("exit status %d, want 3", code)
	}
	s := r.Trace.Entities[0]
	if s.Entity != strings.TrimSuffix(s.Entity, "/") || s.Entity == "" {
		t.Fatalf("entity %q", s.Entity)
	}
	// One sample per interval while the command ran: ticks are on a
	// ticker, and late ones are interpolated, not shifted.
	want := int(took / (20 * time.Millisecond))
	if s.Len() < want-3 || s.Len() > want+1 {
		t.Fatalf("%d samples in %v at 20ms, want about %d", s.Len(), took, want)
	}
}

func TestRecordCancelKillsTree(t *testing.T) {
	skipUnlessLinux(t)
	pidFile := t.TempDir() + "/pid"
	cmd := helperCmd("sleeper")
	cmd.Env = append(cmd.Env, "DEMAND_TEST_PIDFILE="+pidFile)
	ctx, cancel := context.WithCancel(context.Background())
	var grandchild int
	go func() {
		for ctx.Err() == nil {
			if b, err := os.ReadFile(pidFile); err == nil && len(b) > 0 {
				grandchild, _ = strconv.Atoi(string(b))
				time.Sleep(200 * time.Millisecond)
				cancel()
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	start := time.Now()
	r, err := Record(ctx, cmd, RecordOptions{Interval: 20 * time.Millisecond})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
	if time.Since(start) > 20*time.Second {
		t.Fatalf("took %v to cancel", time.Since(start))
	}
	if r == nil || r.State == nil || r.State.Success() {
		t.Fatalf("recording %+v: want the killed command's state", r)
	}
	if r.PeakProcesses < 2 {
		t.Errorf("at most %d processes seen, want 2", r.PeakProcesses)
	}
	if grandchild == 0 {
		t.Fatal("the child's PID was never written")
	}
	// The orphaned child is killed too (init reaps it).
	deadline := time.Now().Add(5 * time.Second)
	for {
		p, ok := readStat(grandchild)
		if !ok || p.state == 'Z' {
			break
		}
		if time.Now().After(deadline) {
			_ = syscall.Kill(grandchild, syscall.SIGKILL)
			t.Fatalf("child %d still running (state %c) after cancel", grandchild, p.state)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestRecordLimitAndErrors(t *testing.T) {
	skipUnlessLinux(t)
	r, err := Record(context.Background(), helperCmd("sleeper"), RecordOptions{Interval: 10 * time.Millisecond, MaxSamples: 5})
	if !errors.Is(err, ErrLimit) {
		t.Fatalf("error %v, want ErrLimit", err)
	}
	if n := r.Trace.Entities[0].Len(); n != 5 {
		t.Fatalf("%d samples, want 5", n)
	}
	if _, err := Record(context.Background(), exec.Command("/nonexistent/command"), RecordOptions{}); err == nil {
		t.Fatal("no error starting a missing command")
	}
	if _, err := Record(context.Background(), helperCmd("exit3"), RecordOptions{Interval: 1234567891}); err == nil ||
		!strings.Contains(err.Error(), "6 significant digits") {
		t.Fatalf("interval of 10 digits: %v", err)
	}
}
