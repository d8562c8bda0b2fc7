package childproc

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMain doubles as the helpers: "parent" starts a bound sleeper, prints
// its PID and waits to be killed; "sleeper" sleeps.
func TestMain(m *testing.M) {
	switch os.Getenv("CHILDPROC_HELPER") {
	case "parent":
		c := Bind(helper("sleeper"))
		if err := c.Start(); err != nil {
			os.Exit(2)
		}
		os.Stdout.WriteString(strconv.Itoa(c.Process.Pid) + "\n")
		time.Sleep(time.Hour)
	case "sleeper":
		time.Sleep(time.Hour)
	default:
		os.Exit(m.Run())
	}
}

func helper(name string) *exec.Cmd {
	c := exec.Command(os.Args[0], "-test.run=^$")
	c.Env = append(os.Environ(), "CHILDPROC_HELPER="+name)
	return c
}

// gone waits until pid no longer runs (a zombie of ours counts as gone),
// or fails the test after a minute.
func gone(t *testing.T, pid int, what string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return
		}
		if f := strings.Fields(string(b)); len(f) > 2 && f[2] == "Z" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s (pid %d) still runs a minute after it should have died", what, pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestChildDiesWithParent: a bound child is killed when the process that
// started it is killed with SIGKILL (nothing of the parent runs to clean up).
func TestChildDiesWithParent(t *testing.T) {
	parent := helper("parent")
	out, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	Start(t, parent)
	var line []byte
	buf := make([]byte, 1)
	for {
		if _, err := out.Read(buf); err != nil {
			t.Fatalf("reading the child's PID: %v", err)
		}
		if buf[0] == '\n' {
			break
		}
		line = append(line, buf[0])
	}
	child, err := strconv.Atoi(string(line))
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(parent.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	gone(t, child, "the child of a killed parent")
}

// TestStartCleanup: Start's cleanup kills the whole group, the command and
// a process it started.
func TestStartCleanup(t *testing.T) {
	var pid, child int
	t.Run("inner", func(t *testing.T) {
		c := helper("parent")
		out, err := c.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		Start(t, c)
		pid = c.Process.Pid
		b := make([]byte, 32)
		n, err := out.Read(b)
		if err != nil {
			t.Fatal(err)
		}
		child, _ = strconv.Atoi(strings.TrimSpace(string(b[:n])))
	})
	gone(t, pid, "the started command after cleanup")
	gone(t, child, "its child after cleanup")
}
