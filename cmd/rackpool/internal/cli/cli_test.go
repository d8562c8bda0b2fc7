package cli

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// TestArgRules: a wrong argument count is a usage error naming the verb's
// usage line; an unexpected argument is named.
func TestArgRules(t *testing.T) {
	cmd := &cobra.Command{Use: "show SYSTEM"}
	for _, tc := range []struct {
		name string
		rule cobra.PositionalArgs
		args []string
		err  string // "" for none
	}{
		{"none given none", NoArgs, nil, ""},
		{"none given one", NoArgs, []string{"x"}, `unexpected argument "x"`},
		{"one given one", OneArg, []string{"x"}, ""},
		{"one given two", OneArg, []string{"x", "y"}, "usage: show SYSTEM"},
		{"some given none", SomeArgs, nil, "usage: show SYSTEM"},
		{"two or more given one", TwoOrMore, []string{"x"}, "usage: show SYSTEM"},
		{"two or more given two", TwoOrMore, []string{"x", "y"}, ""},
		{"at most one given none", AtMostOneArg, nil, ""},
		{"at most one given two", AtMostOneArg, []string{"x", "y"}, "usage: show SYSTEM"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.rule(cmd, tc.args)
			if tc.err == "" {
				if err != nil {
					t.Fatalf("%v, want none", err)
				}
				return
			}
			var ue UsageError
			if !errors.As(err, &ue) || err.Error() != tc.err {
				t.Fatalf("%v (%T), want the usage error %q", err, err, tc.err)
			}
		})
	}
}

// TestGroupRun: a verb made of sub-verbs names them when none or an
// unknown one is given, and suggests the nearest.
func TestGroupRun(t *testing.T) {
	root := &cobra.Command{Use: "rackpool", RunE: GroupRun, SilenceErrors: true, SilenceUsage: true}
	group := &cobra.Command{Use: "drive", RunE: GroupRun, Args: cobra.ArbitraryArgs}
	for _, name := range []string{"show", "token"} {
		group.AddCommand(&cobra.Command{Use: name, Run: func(*cobra.Command, []string) {}})
	}
	root.AddCommand(group)
	root.SetOut(new(strings.Builder))
	root.SetErr(new(strings.Builder))
	for _, tc := range []struct {
		args []string
		err  string
	}{
		{nil, "missing verb"},
		{[]string{"drive"}, "missing subcommand: show, token"},
		{[]string{"drive", "tokn"}, `unknown subcommand "tokn": show, token (did you mean token?)`},
	} {
		root.SetArgs(tc.args)
		err := root.Execute()
		var ue UsageError
		if !errors.As(err, &ue) || err.Error() != tc.err {
			t.Errorf("%q: %v, want the usage error %q", tc.args, err, tc.err)
		}
	}
}

// TestTTLFlag: --ttl must be positive when given, and stays 0 when not.
func TestTTLFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want time.Duration
		ok   bool
	}{
		{nil, 0, true},
		{[]string{"--ttl", "90s"}, 90 * time.Second, true},
		{[]string{"--ttl", "0"}, 0, false},
		{[]string{"--ttl", "-5s"}, 0, false},
		{[]string{"--ttl", "soon"}, 0, false},
	} {
		fs := pflag.NewFlagSet("lease", pflag.ContinueOnError)
		fs.SetOutput(new(strings.Builder))
		var ttl time.Duration
		TTLFlag(fs, &ttl, "lease time")
		err := fs.Parse(tc.args)
		if (err == nil) != tc.ok || ttl != tc.want {
			t.Errorf("%q: ttl %v, error %v; want %v, ok %v", tc.args, ttl, err, tc.want, tc.ok)
		}
	}
}

func TestHuman(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		want string
	}{
		{0, "-"}, {-1, "-"}, {512, "512B"}, {1500, "1.5KB"}, {64 << 30, "64GiB"}, {3 << 20, "3MiB"}, {3e12, "3TB"},
	} {
		if got := Human(tc.n); got != tc.want {
			t.Errorf("Human(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}

// TestWriteFile: the file appears whole in a directory made for it, and
// no temporary file is left.
func TestWriteFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out", "report.json")
	if err := WriteFile(path, []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil || string(b) != "{}\n" {
		t.Fatalf("read %q, %v", b, err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
	if _, err := os.Stat(path + ".tmp"); !os.IsNotExist(err) {
		t.Errorf("temporary file left: %v", err)
	}
}
