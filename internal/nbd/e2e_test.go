package nbd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"rackpool/internal/childproc"
)

// These tests drive the server with third-party NBD clients, and the
// client against nbdkit. A missing tool skips its test, unless
// RACKPOOL_E2E=1 (as in CI), when it fails it.

func needTool(t *testing.T, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("RACKPOOL_E2E") == "1" {
			t.Fatalf("%s not installed (RACKPOOL_E2E=1)", name)
		}
		t.Skipf("%s not installed", name)
	}
	return path
}

// run runs a tool with a timeout and returns its combined output.
func run(t *testing.T, timeout time.Duration, name string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	out, err := childproc.CommandContext(ctx, name, args...).CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("%s %s: timed out after %v\n%s", name, strings.Join(args, " "), timeout, out)
	}
	return string(out), err
}

func (env *testEnv) uri(export string) string {
	return "nbd+unix:///" + export + "?socket=" + env.sock
}

func TestNbdinfoList(t *testing.T) {
	nbdinfo := needTool(t, "nbdinfo")
	env := startEnv(t, nil)
	out, err := run(t, time.Minute, nbdinfo, "--list", "nbd://"+env.tcp)
	if err != nil {
		t.Fatalf("nbdinfo --list: %v\n%s", err, out)
	}
	for _, want := range []string{`export="disk"`, `export="ro"`, "a test disk", "read-only view", "base:allocation"} {
		if !strings.Contains(out, want) {
			t.Errorf("nbdinfo --list output lacks %q:\n%s", want, out)
		}
	}
}

func TestNbdinfoJSON(t *testing.T) {
	nbdinfo := needTool(t, "nbdinfo")
	env := startEnv(t, nil)
	for _, tc := range []struct {
		export   string
		readOnly bool
	}{{"disk", false}, {"ro", true}} {
		out, err := run(t, time.Minute, nbdinfo, "--json", env.uri(tc.export))
		if err != nil {
			t.Fatalf("nbdinfo --json: %v\n%s", err, out)
		}
		var info struct {
			Protocol   string `json:"protocol"`
			Structured bool   `json:"structured"`
			Exports    []struct {
				Name        string   `json:"export-name"`
				Size        uint64   `json:"export-size"`
				Contexts    []string `json:"contexts"`
				ReadOnly    bool     `json:"is_read_only"`
				CanFlush    bool     `json:"can_flush"`
				CanFUA      bool     `json:"can_fua"`
				CanTrim     bool     `json:"can_trim"`
				CanZero     bool     `json:"can_zero"`
				CanFastZero bool     `json:"can_fast_zero"`
				CanMulti    bool     `json:"can_multi_conn"`
				BlockMax    uint32   `json:"block_size_maximum"`
			} `json:"exports"`
		}
		if err := json.Unmarshal([]byte(out), &info); err != nil {
			t.Fatalf("nbdinfo --json: %v\n%s", err, out)
		}
		if info.Protocol != "newstyle-fixed" || !info.Structured || len(info.Exports) != 1 {
			t.Fatalf("nbdinfo: %s", out)
		}
		e := info.Exports[0]
		if e.Name != tc.export || e.Size != testSize || e.ReadOnly != tc.readOnly || !e.CanFlush || !e.CanFUA ||
			!e.CanTrim || !e.CanZero || !e.CanFastZero || !e.CanMulti || e.BlockMax != DefaultMaxPayload ||
			fmt.Sprint(e.Contexts) != "[base:allocation]" {
			t.Fatalf("nbdinfo reports %+v\n%s", e, out)
		}
	}
}

func TestQemuIO(t *testing.T) {
	qemuIO := needTool(t, "qemu-io")
	env := startEnv(t, nil)
	uri := env.uri("disk")
	out, err := run(t, time.Minute, qemuIO, "-f", "raw", uri,
		"-c", "write -P 0xab 0 1M", "-c", "read -P 0xab 0 1M",
		"-c", "write -z 1M 64k", "-c", "read -P 0 1M 64k",
		"-c", "discard 2M 1M", "-c", "read -P 0 2M 1M", "-c", "flush")
	if err != nil || strings.Contains(out, "mismatch") || strings.Contains(out, "verification failed") || strings.Contains(out, "failed") {
		t.Fatalf("qemu-io: %v\n%s", err, out)
	}
	if !strings.Contains(out, "read 1048576/1048576 bytes at offset 0") {
		t.Fatalf("qemu-io did not read back:\n%s", out)
	}
	// The negative check: a wrong pattern is noticed.
	out, _ = run(t, time.Minute, qemuIO, "-f", "raw", uri, "-c", "read -P 0xcd 0 1M")
	if !strings.Contains(out, "mismatch") && !strings.Contains(out, "Pattern verification failed") {
		t.Fatalf("qemu-io found no mismatch reading 0xab as 0xcd:\n%s", out)
	}
	// Writes on the read-only export fail.
	out, _ = run(t, time.Minute, qemuIO, "-f", "raw", env.uri("ro"), "-c", "write -P 1 0 4k")
	if !strings.Contains(strings.ToLower(out), "permission") && !strings.Contains(strings.ToLower(out), "read-only") &&
		!strings.Contains(strings.ToLower(out), "read only") {
		t.Fatalf("qemu-io write on a read-only export:\n%s", out)
	}
}

func TestNbdcopy(t *testing.T) {
	nbdcopy := needTool(t, "nbdcopy")
	env := startEnv(t, nil)
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	data := randBytes(42, 8<<20)
	copy(data[2<<20:3<<20], make([]byte, 1<<20)) // a zero run for sparse copying
	if err := os.WriteFile(src, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := run(t, 2*time.Minute, nbdcopy, src, env.uri("disk")); err != nil {
		t.Fatalf("nbdcopy in: %v\n%s", err, out)
	}
	dst := filepath.Join(dir, "dst")
	if out, err := run(t, 2*time.Minute, nbdcopy, env.uri("disk"), dst); err != nil {
		t.Fatalf("nbdcopy out: %v\n%s", err, out)
	}
	got, err := os.ReadFile(dst)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != testSize || !bytes.Equal(got[:len(data)], data) || !bytes.Equal(got[len(data):], make([]byte, testSize-len(data))) {
		t.Fatal("nbdcopy round trip differs")
	}
}

func TestFio(t *testing.T) {
	fio := needTool(t, "fio")
	env := startEnv(t, nil)
	out, err := run(t, 3*time.Minute, fio, "--name=verify", "--ioengine=nbd", "--uri="+env.uri("disk"),
		"--rw=randwrite", "--bs=4k", "--iodepth=16", "--size=16M", "--verify=crc32c", "--do_verify=1", "--verify_state_save=0",
		"--runtime=60", "--output-format=normal")
	if err != nil {
		t.Fatalf("fio: %v\n%s", err, out)
	}
	if strings.Contains(out, "verify:") && strings.Contains(out, "bad") || strings.Contains(out, "err=") && !strings.Contains(out, "err= 0") {
		t.Fatalf("fio reported errors:\n%s", out)
	}
	if !strings.Contains(out, "READ:") || !strings.Contains(out, "WRITE:") {
		t.Fatalf("fio did not write and verify:\n%s", out)
	}
}

// startNbdkit runs nbdkit's memory plugin on a unix socket.
func startNbdkit(t *testing.T, args ...string) string {
	t.Helper()
	nbdkit := needTool(t, "nbdkit")
	dir, err := os.MkdirTemp("", "nbdkit")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "s")
	cmd := childproc.Command(nbdkit, append(append([]string{"-f", "-U", sock}, args...), "memory", "16M")...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("unix", sock); err == nil {
			c.Close()
			return sock
		}
		select {
		case <-exited:
			t.Fatalf("nbdkit exited: %s", stderr.String())
		default:
		}
		if time.Since(start) > 10*time.Second {
			t.Fatalf("nbdkit did not start: %s", stderr.String())
		}
	}
}

func TestClientAgainstNbdkit(t *testing.T) {
	for _, tc := range []struct {
		name       string
		args       []string
		structured bool
	}{
		{"default", nil, true},
		{"no-structured-replies", []string{"--no-sr"}, false},
		{"not-fixed-newstyle", []string{"--mask-handshake=0"}, false},
		{"noextents", []string{"--filter=noextents"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sock := startNbdkit(t, tc.args...)
			ctx := testCtx(t)
			c, err := Dial(ctx, "unix", sock, "")
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if c.structured != tc.structured || c.Flags().CanBlockStatus != tc.structured || c.Size() != 16<<20 {
				t.Fatalf("structured %v, block status %v, size %d", c.structured, c.Flags().CanBlockStatus, c.Size())
			}
			data := randBytes(5, 3<<20)
			if err := c.WriteAt(ctx, data, 4096, true); err != nil {
				t.Fatal(err)
			}
			got := make([]byte, len(data))
			if err := c.ReadAt(ctx, got, 4096); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, data) {
				t.Fatal("read back differs")
			}
			if err := c.Zero(ctx, 8192, 4096, ZeroFlags{}); err != nil {
				t.Fatal(err)
			}
			if err := c.ReadAt(ctx, got[:4096], 8192); err != nil || !bytes.Equal(got[:4096], make([]byte, 4096)) {
				t.Fatalf("zeroed range: %v", err)
			}
			err = c.ReadAt(ctx, got[:4096], 16<<20)
			var e *Error
			if !errors.As(err, &e) || errors.Is(err, ErrClosed) {
				t.Fatalf("read past the end: %v, want a server error", err)
			}
			ext, err := c.BlockStatus(ctx, 0, 16<<20)
			if c.Flags().CanBlockStatus {
				var total uint64
				for _, e := range ext {
					total += e.Length
				}
				if err != nil || total == 0 || total > 16<<20 {
					t.Fatalf("BlockStatus: %v %+v", err, ext)
				}
			} else if !errors.Is(err, ErrNotSupported) {
				t.Fatalf("BlockStatus without a context: %v", err)
			}
			if err := c.Flush(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
	t.Run("list", func(t *testing.T) {
		sock := startNbdkit(t)
		infos, err := List(testCtx(t), "unix", sock)
		if err != nil || len(infos) != 1 {
			t.Fatalf("List: %v %+v", err, infos)
		}
	})
}
