package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"rackpool/internal/childproc"
)

// TestCompletion: the binary writes completion scripts for bash, zsh and
// fish, and completes verbs, sub-verbs and flags when the scripts ask it
// (rackpool __complete ARGS... is what all three run on a Tab). Where
// bash-completion is installed, bash itself completes a verb and a flag
// through the script.
func TestCompletion(t *testing.T) {
	complete := func(args ...string) []string {
		t.Helper()
		out, err := childproc.Command(binary, append([]string{"__complete"}, args...)...).Output()
		if err != nil {
			t.Fatalf("rackpool __complete %q: %v", args, err)
		}
		var words []string
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if !strings.HasPrefix(l, ":") { // the last line is cobra's directive
				words = append(words, strings.SplitN(l, "\t", 2)[0])
			}
		}
		return words
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"comp"}, "compose"},
		{[]string{"comp"}, "completion"},
		{[]string{"compose", "--ne"}, "--need"},
		{[]string{"compose", "-"}, "--quiet"},
		{[]string{"drive", ""}, "connect"},
		{[]string{"drive", "connect", "ssd1", "--li"}, "--listen"},
		{[]string{"provision", "e"}, "eval"},
		{[]string{"sim", "--scen"}, "--scenario"},
	} {
		if got := complete(tc.args...); !slices.Contains(got, tc.want) {
			t.Errorf("rackpool %s<Tab>: %q, want %q among them", strings.Join(tc.args, " "), got, tc.want)
		}
	}
	for _, shell := range []string{"bash", "zsh", "fish"} {
		out, err := childproc.Command(binary, "completion", shell).Output()
		if err != nil || !strings.Contains(string(out), "__complete") {
			t.Errorf("rackpool completion %s: %v, %d bytes without __complete", shell, err, len(out))
		}
	}

	t.Run("bash", func(t *testing.T) {
		const bashCompletion = "/usr/share/bash-completion/bash_completion"
		bash, err := exec.LookPath("bash")
		if _, serr := os.Stat(bashCompletion); err != nil || serr != nil {
			if os.Getenv("RACKPOOL_E2E") == "1" {
				t.Fatalf("bash or bash-completion (%s) is not installed (scripts/setup.sh installs it)", bashCompletion)
			}
			t.Skip("needs bash and bash-completion (" + bashCompletion + ")")
		}
		// The script runs the program named on the command line: put the
		// binary on PATH as rackpool.
		dir := t.TempDir()
		if err := os.Symlink(binary, filepath.Join(dir, "rackpool")); err != nil {
			t.Fatal(err)
		}
		script := `source ` + bashCompletion + `
source <(rackpool completion bash)
tab() {
	COMP_LINE="$1" COMP_POINT=${#1}
	read -ra COMP_WORDS <<<"$1"
	[[ $1 == *" " ]] && COMP_WORDS+=("")
	COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
	COMPREPLY=()
	__start_rackpool rackpool
	echo "${COMPREPLY[*]}"
}
tab "rackpool decomp"
tab "rackpool blocks --ki"
`
		cmd := childproc.Command(bash, "--norc", "-c", script)
		cmd.Env = append(os.Environ(), "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"))
		var stderr strings.Builder
		cmd.Stderr = &stderr // compopt complains outside a real Tab
		out, err := cmd.Output()
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if err != nil || len(lines) != 2 || strings.TrimSpace(lines[0]) != "decompose" || !strings.Contains(lines[1], "--kind") {
			t.Errorf("bash completion: %v, want \"decompose\" then --kind:\n%s%s", err, out, stderr.String())
		}
	})
}
