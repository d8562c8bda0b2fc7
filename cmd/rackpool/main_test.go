package main

import (
	"bytes"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestExitStatus: 2 for a command line that does not parse, 1 for a verb
// that fails, 0 otherwise; errors name the verb.
func TestExitStatus(t *testing.T) {
	t.Setenv("RACKPOOL_PASSWORD", "")
	for _, tc := range []struct {
		name   string
		args   []string
		status int
		stderr string
	}{
		{"no verb", nil, exitUsage, "rackpool: missing verb"},
		{"unknown verb", []string{"compse"}, exitUsage, `rackpool: unknown verb "compse" (did you mean compose?)`},
		{"unknown flag", []string{"blocks", "--colour"}, exitUsage, "rackpool blocks: unknown flag: --colour"},
		{"single-dash long flag", []string{"blocks", "-json"}, exitUsage, "rackpool blocks: unknown shorthand flag"},
		{"bad flag value", []string{"lease", "--size", "1MiB", "--ttl", "soon"}, exitUsage, `rackpool lease: invalid argument "soon"`},
		{"argument count", []string{"show"}, exitUsage, "rackpool show: usage: rackpool show SYSTEM"},
		{"unexpected argument", []string{"blocks", "gpu1"}, exitUsage, `rackpool blocks: unexpected argument "gpu1"`},
		{"missing sub-verb", []string{"drive"}, exitUsage, "rackpool drive: missing subcommand: connect, release, show, token"},
		{"unknown sub-verb", []string{"provision", "evaluate"}, exitUsage, `rackpool provision: unknown subcommand "evaluate"`},
		{"nothing to compose", []string{"compose"}, exitUsage, "rackpool compose: name blocks, --need or --host"},
		{"failure", []string{"blocks"}, exitFailure, "rackpool blocks: set RACKPOOL_PASSWORD"},
		{"sub-verb failure", []string{"drive", "show", "ssd1"}, exitFailure, "rackpool drive show: set RACKPOOL_PASSWORD"},
		{"raw verb failure", []string{"topology", "--file", "/nonexistent.yaml"}, exitFailure, "rackpool topology: "},
		{"help", []string{"help"}, 0, ""},
		{"verb help", []string{"compose", "--help"}, 0, ""},
		{"sub-verb help", []string{"help", "drive", "connect"}, 0, ""},
		{"raw verb help", []string{"nbd-certs", "--help"}, 0, ""},
		{"version", []string{"version"}, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			var status int
			stdout(t, func() error { status = run(tc.args, &stderr); return nil })
			if status != tc.status {
				t.Errorf("rackpool %q exited %d, want %d\n%s", tc.args, status, tc.status, stderr.String())
			}
			if !strings.HasPrefix(stderr.String(), tc.stderr) && !strings.Contains(stderr.String(), "\n"+tc.stderr) {
				t.Errorf("rackpool %q wrote %q, want a line starting %q", tc.args, stderr.String(), tc.stderr)
			}
		})
	}
}

// TestHelpIsComplete: every verb and sub-verb says what it does in one
// line and in a paragraph, and shows its usage.
func TestHelpIsComplete(t *testing.T) {
	var walk func(c *cobra.Command)
	n := 0
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			if sub.Name() == "help" || sub.Name() == "completion" || sub.Hidden {
				continue // cobra's own
			}
			n++
			if sub.Short == "" || sub.Long == "" {
				t.Errorf("%s: Short %q, Long %q: want both", sub.CommandPath(), sub.Short, sub.Long)
			}
			if sub.HasParent() && !strings.HasPrefix(sub.Use, sub.Name()) {
				t.Errorf("%s: Use %q does not start with the verb", sub.CommandPath(), sub.Use)
			}
			if sub.GroupID == "" && c == sub.Root() {
				t.Errorf("%s: in no group of rackpool help", sub.CommandPath())
			}
			walk(sub)
		}
	}
	walk(newRoot())
	if n < 40 {
		t.Errorf("%d verbs and sub-verbs, want the 31 verbs and their sub-verbs", n)
	}
}

// stdout runs f and returns what it printed.
func stdout(t *testing.T, f func() error) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stdout
	os.Stdout = w
	done := make(chan string)
	go func() {
		b, _ := io.ReadAll(r)
		done <- string(b)
	}()
	ferr := f()
	os.Stdout = old
	w.Close()
	out := <-done
	if ferr != nil {
		t.Fatalf("%v\n%s", ferr, out)
	}
	return out
}
