// Package childproc ties the processes that tests and benchmarks start
// (servers under test, peers, clients, tools) to their starter, so that
// none outlives it: not when the starter returns, fails, is interrupted,
// or is killed.
//
// Bind puts a command in a process group of its own, which the kernel
// kills when the starter dies (Linux's parent-death signal), and Stop
// kills that group, so that whatever the command itself started in its
// group goes too. Start does both for a test: it starts the command and
// registers the group's kill in the test's cleanup.
package childproc

import (
	"context"
	"os/exec"
	"syscall"
	"time"
)

// Bind makes cmd start in a new process group and be killed (SIGKILL)
// when the process that starts it dies. Call it before cmd.Start. It keeps
// the rest of cmd.SysProcAttr (credentials, for one).
//
// The kernel sends the parent-death signal when the thread that started
// cmd exits; the Go runtime keeps its threads for the life of the process
// unless a goroutine locked to one ends, so start bound commands from
// goroutines that do not call runtime.LockOSThread.
func Bind(cmd *exec.Cmd) *exec.Cmd {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	return cmd
}

// Stop kills cmd's process group with SIGKILL (cmd and every process of
// its group, which Bind made cmd lead). It does not wait for cmd; a
// command that was never started, or whose group is gone, is no error.
func Stop(cmd *exec.Cmd) {
	if cmd == nil || cmd.Process == nil {
		return
	}
	pid := cmd.Process.Pid
	if cmd.SysProcAttr != nil && cmd.SysProcAttr.Setpgid {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
	_ = cmd.Process.Kill()
}

// TB is the part of testing.TB that Start needs.
type TB interface {
	Helper()
	Cleanup(func())
	Fatalf(format string, args ...any)
}

// Start binds cmd, starts it, and registers its end in tb's cleanup: the
// group is killed and cmd waited for (at most a minute, in case a
// grandchild holds its output pipes open). A start that fails fails the
// test.
func Start(tb TB, cmd *exec.Cmd) *exec.Cmd {
	tb.Helper()
	Bind(cmd)
	if cmd.WaitDelay == 0 {
		cmd.WaitDelay = time.Minute
	}
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start %s: %v", cmd.Path, err)
	}
	tb.Cleanup(func() {
		Stop(cmd)
		// Killed on purpose: the exit status says so. A test that waited
		// for cmd itself makes this Wait return at once.
		_ = cmd.Wait()
	})
	return cmd
}

// Command is exec.Command, bound (Bind).
func Command(name string, args ...string) *exec.Cmd {
	return Bind(exec.Command(name, args...))
}

// CommandContext is exec.CommandContext, bound (Bind); when ctx is done it
// kills cmd's whole group, not cmd alone.
func CommandContext(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := Bind(exec.CommandContext(ctx, name, args...))
	cmd.Cancel = func() error {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		return cmd.Process.Kill() // what exec's own Cancel returns
	}
	return cmd
}
