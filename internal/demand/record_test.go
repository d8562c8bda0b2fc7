package demand

import (
	"bufio"
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

// runHelper runs the helper named h. The test paces steps and exit3
// through their standard input, one line a step, once its samples have
// seen the step before (never by sleeping):
//   - steps: say "ready" on the standard output once started, then after
//     a line allocate 64 MiB, after the next 64 MiB more, after the next
//     start a child holding 128 MiB more, wait for it and exit; it says
//     "done" on the standard output after each allocation;
//   - child: hold 128 MiB, say "done" on the standard output it shares
//     with steps, and exit after a line on the standard input it shares;
//   - exit3: exit with status 3 after a line;
//   - sleeper: start a child sleeper, write its PID to $DEMAND_TEST_PIDFILE
//     and sleep a minute (the child just sleeps).
func runHelper(h string) int {
	switch h {
	case "steps":
		fmt.Println("ready")
		readLine()
		a := touch(64 << 20)
		fmt.Println("done")
		readLine()
		b := touch(64 << 20)
		fmt.Println("done")
		readLine()
		c := helperCmd("child")
		c.Stdin, c.Stdout = os.Stdin, os.Stdout
		if err := c.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			return 1
		}
		runtime.KeepAlive(a)
		runtime.KeepAlive(b)
	case "child":
		c := touch(128 << 20)
		fmt.Println("done")
		readLine()
		runtime.KeepAlive(c)
	case "exit3":
		readLine()
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

// readLine reads one line from the standard input a byte at a time, so that
// nothing meant for a child sharing it is buffered here.
func readLine() {
	var b [1]byte
	for {
		if n, err := os.Stdin.Read(b[:]); err != nil || (n == 1 && b[0] == '\n') {
			return
		}
	}
}

// pacer feeds a helper's standard input: next writes the line that lets it
// take its next step.
type pacer struct{ w *os.File }

// pace gives cmd a pipe as its standard input; the test's cleanup closes it
// (a helper still waiting then goes on).
func pace(t *testing.T, cmd *exec.Cmd) *pacer {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdin = r
	t.Cleanup(func() { r.Close(); w.Close() })
	return &pacer{w}
}

func (p *pacer) next() { fmt.Fprintln(p.w) }

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
	cmd := helperCmd("steps")
	p := pace(t, cmd)
	// The helper says when it has started and when it has finished each
	// step; the sample after it said so is the one that must see the
	// step. RSS alone would not do: the race detector's shadow memory
	// makes a 64 MiB step 128 MiB, and it arrives over several samples.
	said := make(chan struct{}, 4)
	rr, rw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rr.Close(); rw.Close() })
	cmd.Stdout = rw
	go func() {
		sc := bufio.NewScanner(rr)
		for sc.Scan() {
			said <- struct{}{}
		}
	}()
	// The steps: the start, 64 MiB grown, 64 MiB more, and the child's
	// 128 MiB on top (then both exit). at[k] is the first sample taken
	// after the helper said step k was done.
	stage, heard := 0, false
	var at [4]int
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := Record(ctx, cmd, RecordOptions{
		Interval: 50 * time.Millisecond,
		Entity:   "steps",
		OnSample: func(s Sample) {
			samples = append(samples, s)
			if s.Interpolated || stage == len(at) {
				return
			}
			if !heard {
				// Heard now, so the next sample is taken after it.
				select {
				case <-said:
					heard = true
				default:
				}
				return
			}
			at[stage] = len(samples) - 1
			stage++
			heard = false
			p.next()
		},
	})
	if err != nil {
		t.Fatalf("%v, after %d samples waiting for step %d (1: the start, 2: 64 MiB grown, 3: 128 MiB, 4: the child's 128 MiB more)", err, len(samples), stage+1)
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
	const gmib = 1.0 / 1024
	first, peak := s.MemoryGiB[0], slices.Max(s.MemoryGiB)
	t.Logf("%d samples over %.1f s, first %.0f MiB, peak %.0f MiB, %d processes at most, %d interpolated",
		s.Len(), tr.End(&s), first/gmib, peak/gmib, r.PeakProcesses, r.Interpolated)
	if first > 60*gmib {
		t.Errorf("first sample %.0f MiB: taken after the allocation?", first/gmib)
	}
	// Parent 128 MiB and child 128 MiB at once: only the whole tree
	// reaches 250 MiB.
	if peak-first < 250*gmib {
		t.Errorf("peak %.0f MiB, want the tree's 256 MiB and more", peak/gmib)
	}
	if r.PeakProcesses < 2 {
		t.Errorf("at most %d processes in the tree, want the child counted", r.PeakProcesses)
	}
	// Each step in the trace, in order, in the sample taken after the
	// helper said it was done: at least what it allocated more than the
	// step before (the race detector may double it).
	for k, want := range []float64{60, 60, 120} {
		i, j := at[k], at[k+1]
		if grown := (s.MemoryGiB[j] - s.MemoryGiB[i]) / gmib; grown < want {
			t.Errorf("sample %d %.0f MiB above sample %d, want step %d's %.0f MiB and more", j, grown, i, k+1, want)
		}
	}
	if n := samples[at[3]].Processes; n < 2 {
		t.Errorf("sample %d: %d processes with the child running", at[3], n)
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

// TestRecordDoesNotDrift: samples are placed by the clock, one per interval
// elapsed, however late a tick is served: never more samples than
// intervals elapsed, and the command, kept running until a sample at index
// 15 or later was taken, has at least 16.
func TestRecordDoesNotDrift(t *testing.T) {
	skipUnlessLinux(t)
	const interval = 20 * time.Millisecond
	cmd := helperCmd("exit3")
	p := pace(t, cmd)
	released := false
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := time.Now()
	r, err := Record(ctx, cmd, RecordOptions{Interval: interval, OnSample: func(s Sample) {
		if !released && s.Elapsed >= 15*interval {
			released = true
			p.next()
		}
	}})
	took := time.Since(start)
	if err != nil {
		t.Fatalf("%v (released: %v)", err, released)
	}
	if code := r.State.ExitCode(); code != 3 {
		t.Fatalf("exit status %d, want 3", code)
	}
	s := r.Trace.Entities[0]
	if s.Entity != strings.TrimSuffix(s.Entity, "/") || s.Entity == "" {
		t.Fatalf("entity %q", s.Entity)
	}
	// Sample k is taken at the tick nearest k intervals after the start.
	most := int(took/interval) + 2
	if s.Len() < 16 || s.Len() > most {
		t.Fatalf("%d samples in %v at %v, want 16 to %d", s.Len(), took, interval, most)
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
	// The orphaned child is killed too (init reaps it): a minute at most,
	// for a loaded machine.
	deadline := time.Now().Add(time.Minute)
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
