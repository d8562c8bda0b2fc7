package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"rackpool/api"
	"rackpool/internal/childproc"
)

// pastedDocs are the sections of the documentation whose "$" lines a
// reader pastes, in the order a reader of each document pastes them.
var pastedDocs = []struct {
	name, file string
	sections   []string
	// check, when set, runs after the last line, in the second terminal.
	check func(t *testing.T, term *terminal)
}{
	{"README", "README.md", []string{"## A five-minute tour"}, checkTourAudit},
	{"memory", "docs/memory.md", []string{"## Run it", "## Mapped leases: (a) on this machine"}, nil},
	{"storage", "docs/storage.md", []string{"## Run it", "### In the simulator"}, nil},
	{"redfish", "docs/redfish.md", []string{"## Deploying an operating system on a composed system"}, nil},
	{"cxl", "docs/cxl.md", []string{"## Try it"}, nil},
	{"telemetry", "docs/telemetry.md", []string{"## Try it"}, nil},
}

// TestTour pastes the README's "A five-minute tour", and the sections of
// docs/ that say they can be pasted, into shells as a reader would: every
// line that starts with "$" (with its continuation lines), in order, one
// at a time, read from the documents themselves so that they and this
// test cannot drift apart. The block that starts the control plane in the
// foreground (`make run`, started as the Makefile's run recipe starts it,
// or `bin/rackpool serve` itself) is the first terminal; every other block
// is the second terminal, one bash that keeps its variables
// and background jobs from line to line. Each line must exit 0 and print
// no CLI or Redfish error. Each document starts from a fresh directory.
//
// What differs from a reader's terminal, and why:
//   - The shells run in a temporary directory that holds bin/rackpool and
//     examples/, so the documents write their data/ and out/ there, not in
//     the repository.
//   - Every 127.0.0.1:PORT is moved to a free port (this machine runs other
//     tests), and RACKPOOL_URL points the CLI at the moved 8080.
//   - A line that starts something in the background (`&`) is followed by
//     the next only once that process says it is ready, as a person reads
//     its log line before pasting on (tourReady).
//   - The P4-scale run simulates fewer requests (tourAdjust).
func TestTour(t *testing.T) {
	skipShort(t)
	needTools(t, "bash", "curl", "jq", "nbdinfo", "qemu-img")
	recipe := makeRunRecipe(t, "../Makefile")
	for _, doc := range pastedDocs {
		t.Run(doc.name, func(t *testing.T) {
			var steps []tourStep
			for _, sec := range doc.sections {
				steps = append(steps, readSection(t, doc.file, sec)...)
			}
			adjustTour(t, doc.file, steps)
			term := paste(t, recipe, steps)
			if doc.check != nil {
				doc.check(t, term)
			}
		})
	}
}

// checkTourAudit: the audit log names what the tour did, its shrink a
// Shrink.
func checkTourAudit(t *testing.T, term *terminal) {
	st := tourStep{file: "(after the tour)", text: "bin/rackpool audit --format jsonl"}
	out := term.run(t, st, st.text)
	var actions []string
	for _, l := range lines(out) {
		var e struct{ Target, Outcome string }
		if json.Unmarshal([]byte(l), &e) == nil && strings.Contains(e.Target, "/Actions/") {
			actions = append(actions, e.Target[strings.LastIndex(e.Target, "/")+1:]+" "+e.Outcome)
		}
	}
	if !strings.Contains(strings.Join(actions, ","), "Rackpool.Shrink success") {
		t.Errorf("the audit log's actions %v have no successful Rackpool.Shrink", actions)
	}
}

// paste runs steps in two terminals in a fresh directory and returns the
// second terminal, still running.
func paste(t *testing.T, recipe string, steps []tourStep) *terminal {
	t.Helper()
	// The ports the steps name, each moved to a free one.
	ports := map[string]string{}
	addrRE := regexp.MustCompile(`127\.0\.0\.1:\d+`)
	for _, s := range append([]string{recipe}, tourTexts(steps)...) {
		for _, a := range addrRE.FindAllString(s, -1) {
			if ports[a] == "" {
				ports[a] = freeAddr(t)
			}
		}
	}
	control := ports["127.0.0.1:8080"]
	if control == "" {
		t.Fatalf("the run recipe %q does not serve on 127.0.0.1:8080, where the CLI looks by default", recipe)
	}
	move := func(s string) string {
		return addrRE.ReplaceAllStringFunc(s, func(a string) string { return ports[a] })
	}

	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{"bin/rackpool": binary, "examples": "../examples"} {
		abs, err := filepath.Abs(target)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(abs, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	// curl prints no progress meter on a terminal; here its output is a
	// pipe, so say so, for a readable transcript.
	if err := os.WriteFile(filepath.Join(dir, ".curlrc"), []byte("no-progress-meter\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"RACKPOOL_URL=https://" + control, "CURL_HOME=" + dir}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "RACKPOOL_") {
			env = append(env, kv)
		}
	}
	serverTerm := startTerminal(t, "server terminal", dir, env)
	userTerm := startTerminal(t, "second terminal", dir, env)

	serving := false
	for _, st := range steps {
		text := move(st.text)
		if st.server {
			cmd, data, ok := serveCommand(st.text, recipe)
			if !ok {
				serverTerm.run(t, st, text)
				continue
			}
			// The server runs as long as the test: wait for it, not for
			// the line to end.
			serverTerm.send(t, "{ "+move(cmd)+"\n} </dev/null 3>&- & wait $!\n")
			waitServing(t, serverTerm, filepath.Join(dir, data), "https://"+control, st)
			serving = true
			continue
		}
		if !serving {
			t.Fatalf("%s: %q comes before the server is started (make run or bin/rackpool serve)", st.where(), st.text)
		}
		start := userTerm.out.len()
		userTerm.run(t, st, text)
		if background(st.text) {
			waitReady(t, userTerm, start, st)
		}
	}
	return userTerm
}

// tourStep is one command of a document: a "$" line and its continuations.
type tourStep struct {
	file   string
	line   int
	text   string // without the "$ "
	server bool   // in the block that starts the control plane (the first terminal)
}

func (s tourStep) where() string { return fmt.Sprintf("%s:%d", s.file, s.line) }

func tourTexts(steps []tourStep) []string {
	var out []string
	for _, s := range steps {
		out = append(out, s.text)
	}
	return out
}

// readSection returns the commands of one section of a document: from its
// heading to the next heading of the same or a higher level.
func readSection(t *testing.T, file, heading string) []tourStep {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", file))
	if err != nil {
		t.Fatal(err)
	}
	level := len(heading) - len(strings.TrimLeft(heading, "#"))
	all := strings.Split(string(data), "\n")
	at := slices.Index(all, heading)
	if at < 0 {
		t.Fatalf("%s has no heading %q", file, heading)
	}
	var steps, block []tourStep
	inBlock, cont := false, false
	flush := func() {
		server := slices.ContainsFunc(block, func(s tourStep) bool { _, _, ok := serveCommand(s.text, ""); return ok })
		for _, s := range block {
			s.server = server
			steps = append(steps, s)
		}
		block = nil
	}
	for i := at + 1; i < len(all); i++ {
		l := all[i]
		if h := len(l) - len(strings.TrimLeft(l, "#")); !inBlock && h > 0 && h <= level && strings.HasPrefix(l[h:], " ") {
			break
		}
		switch {
		case strings.HasPrefix(l, "```"):
			if inBlock {
				flush()
			}
			inBlock, cont = !inBlock, false
		case !inBlock:
		case cont:
			block[len(block)-1].text += "\n" + l
			cont = strings.HasSuffix(l, `\`)
		case strings.HasPrefix(l, "$ "):
			block = append(block, tourStep{file: file, line: i + 1, text: strings.TrimPrefix(l, "$ ")})
			cont = strings.HasSuffix(l, `\`)
		}
	}
	if len(steps) == 0 {
		t.Fatalf("%s: the section %q has no commands", file, heading)
	}
	comment := regexp.MustCompile(`(?m)\s#.*$`)
	for _, s := range steps {
		// A quoted string that runs over a line is pasted fine, but this
		// reader ends a command at a line without a backslash: bash would
		// wait for the rest.
		if strings.Count(comment.ReplaceAllString(s.text, ""), "'")%2 != 0 {
			t.Fatalf("%s: a quote is left open at the end of the command: continue its lines with a backslash, outside quotes", s.where())
		}
	}
	return steps
}

// serveCommand reports whether a document's command starts the control
// plane in the foreground of its terminal, and if so the command to run
// and the data directory that will hold its CA: `make run` runs recipe,
// with its --data; `bin/rackpool serve ...` (not in the background) runs
// itself.
func serveCommand(text, recipe string) (cmd, data string, ok bool) {
	text = strings.TrimSpace(text)
	switch {
	case text == "make run":
		cmd = recipe
	case strings.HasPrefix(text, "bin/rackpool serve") && !background(text) && !strings.Contains(text, "\n"):
		cmd = text
	default:
		return "", "", false
	}
	data = "data" // serve's default, ./data
	f := strings.Fields(cmd)
	for i, a := range f {
		if v, found := strings.CutPrefix(a, "--data="); found {
			data = v
		} else if a == "--data" && i+1 < len(f) {
			data = f[i+1]
		}
	}
	return cmd, data, true
}

// makeRunRecipe is the command `make run` runs, with $(BIN) filled in.
func makeRunRecipe(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var bin, recipe string
	ls := strings.Split(string(data), "\n")
	for i, l := range ls {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "BIN" && (f[1] == ":=" || f[1] == "=" || f[1] == "?=") {
			bin = f[2]
		}
		if strings.HasPrefix(l, "run:") && i+1 < len(ls) && strings.HasPrefix(ls[i+1], "\t") {
			recipe = strings.TrimSpace(ls[i+1])
		}
	}
	recipe = strings.ReplaceAll(recipe, "$(BIN)", bin)
	if recipe == "" || bin == "" || strings.Contains(recipe, "$") {
		t.Fatalf("%s: cannot read the run target's command (BIN %q, recipe %q)", path, bin, recipe)
	}
	return recipe
}

// tourAdjust changes a command whose full run does not belong in a test;
// each must match exactly one command of its document.
var tourAdjust = []struct{ file, match, replace, why string }{
	{"README.md", "monet-p4-scale.yaml --out out/p4", "monet-p4-scale.yaml --out out/p4 --requests 20000",
		"the pod is built as documented, but 10^6 requests take a minute of both cores; 20,000 take seconds"},
}

func adjustTour(t *testing.T, file string, steps []tourStep) {
	t.Helper()
	for _, a := range tourAdjust {
		if a.file != file {
			continue
		}
		n := 0
		for i := range steps {
			if strings.Contains(steps[i].text, a.match) {
				steps[i].text = strings.Replace(steps[i].text, a.match, a.replace, 1)
				n++
			}
		}
		if n != 1 {
			t.Fatalf("tourAdjust %q matches %d commands of %s, want 1: update it with the document", a.match, n, file)
		}
	}
}

// background reports whether a command leaves a job running (`cmd &` or
// `cmd & VAR=$!`, before any comment).
func background(text string) bool {
	last := text[strings.LastIndex(text, "\n")+1:]
	if i := strings.Index(last, " #"); i >= 0 {
		last = last[:i]
	}
	return regexp.MustCompile(`&\s*(\w+=\$!)?\s*$`).MatchString(last)
}

// tourReady is what each background process of the tour prints once it is
// ready. An SSE stream prints nothing until an event: nothing to wait for
// (had it ended, its `kill` would fail; a document that needs its first
// message waits for it itself).
var tourReady = []struct{ command, log string }{
	{"bin/rackpool memnode ", `msg="memnode serving"`},
	{"bin/rackpool cache ", `msg="cache serving"`},
	{"bin/rackpool blocknode ", `msg="blocknode serving"`},
	{"bin/rackpool drive connect ", `msg="drive connected"`},
	{"bin/rackpool fabric-emulator ", `msg="rackpool fabric-emulator serving"`},
	{"bin/rackpool agent ", `msg="agent reporting"`},
	{"/EventService/SSE", ""},
}

// stepWait bounds one command of the tour: the slowest (the P4 pod, a
// fabric emulator) take seconds when the machine is idle.
const stepWait = 3 * time.Minute

func waitReady(t *testing.T, term *terminal, start int, st tourStep) {
	t.Helper()
	for _, r := range tourReady {
		if !strings.Contains(st.text, r.command) {
			continue
		}
		deadline := time.Now().Add(stepWait)
		for time.Now().Before(deadline) {
			if strings.Contains(term.out.since(start), r.log) {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("%s: %q: not ready after %v (waited for %q):\n%s", st.where(), st.text, stepWait, r.log, term.out.since(start))
	}
	t.Fatalf("%s: %q runs in the background, and tourReady does not say how it shows it is ready", st.where(), st.text)
}

// waitServing waits until the first terminal's server logs that it
// serves and answers (trusting the CA in data, its data directory), and
// checks the first start was quiet: no warning.
func waitServing(t *testing.T, term *terminal, data, url string, st tourStep) {
	t.Helper()
	pass := ""
	if m := regexp.MustCompile(`RACKPOOL_ADMIN_PASSWORD=(\S+)`).FindStringSubmatch(term.history); m != nil {
		pass = m[1]
	}
	if pass == "" {
		t.Fatalf("%s: %q comes without an export of RACKPOOL_ADMIN_PASSWORD before it in its terminal", st.where(), st.text)
	}
	deadline := time.Now().Add(startTimeout)
	for time.Now().Before(deadline) {
		out := term.out.since(0)
		if strings.Contains(out, "rackpool serving") {
			cfg, err := api.TLSConfig(filepath.Join(data, "tls", "ca.pem"))
			if err != nil {
				t.Fatalf("the server's CA: %v\n%s", err, out)
			}
			c := api.New(url, "Administrator", pass)
			c.HTTP = &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}
			if _, err := c.Systems(context.Background()); err != nil {
				t.Fatalf("the server logs that it serves, but: %v\n%s", err, out)
			}
			if strings.Contains(out, "level=WARN") || strings.Contains(out, "level=ERROR") {
				t.Errorf("%s: the first start is not quiet:\n%s", st.where(), out)
			}
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s: %q: not serving after %v:\n%s", st.where(), st.text, startTimeout, term.out.since(0))
}

// terminal is one bash, fed a document's commands on its standard input.
// A command's exit status comes back on descriptor 3, which the commands
// themselves do not inherit.
type terminal struct {
	name    string
	cmd     *exec.Cmd
	in      io.WriteCloser
	out     *syncBuffer
	status  chan string
	history string // every command sent
}

func startTerminal(t *testing.T, name, dir string, env []string) *terminal {
	t.Helper()
	cmd := exec.Command("bash", "--norc", "--noprofile")
	cmd.Dir, cmd.Env = dir, env
	// The group of this bash holds everything the tour starts in it (no
	// job control: background jobs stay in the group). When the test
	// ends, the cleanup kills the group; when the test process dies, bash
	// gets SIGTERM and kills the group itself (the trap below).
	childproc.Bind(cmd)
	cmd.SysProcAttr.Pdeathsig = syscall.SIGTERM
	cmd.WaitDelay = time.Minute
	term := &terminal{name: name, cmd: cmd, out: &syncBuffer{}, status: make(chan string, 1)}
	cmd.Stdout, cmd.Stderr = term.out, term.out
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.ExtraFiles = []*os.File{w}
	if term.in, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	t.Cleanup(func() {
		childproc.Stop(cmd)
		_ = cmd.Wait()
		r.Close()
		if t.Failed() {
			t.Logf("%s, transcript:\n%s", name, term.out.since(0))
		}
	})
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			term.status <- sc.Text()
		}
		close(term.status)
	}()
	term.send(t, "trap 'kill -KILL 0' TERM\n")
	return term
}

func (term *terminal) send(t *testing.T, s string) {
	t.Helper()
	term.history += s
	if _, err := io.WriteString(term.in, s); err != nil {
		t.Fatalf("write to bash: %v", err)
	}
}

// cliError is a line the CLI prints when a verb fails; redfishError the
// error object of a Redfish answer (curl prints it and exits 0).
var (
	cliError     = regexp.MustCompile(`(?m)^rackpool [a-z-]+( [a-z]+)?: `)
	redfishError = regexp.MustCompile(`"error":\s*\{`)
)

// run sends one command, waits for its exit status and returns what the
// terminal printed meanwhile; anything but success fails the test.
func (term *terminal) run(t *testing.T, st tourStep, text string) string {
	t.Helper()
	start := term.out.len()
	term.send(t, "{ "+text+"\n} </dev/null 3>&-; printf '%d\\n' $? >&3\n")
	var status string
	var ok bool
	select {
	case status, ok = <-term.status:
	case <-time.After(stepWait):
		t.Fatalf("%s: %q did not finish in %v:\n%s", st.where(), st.text, stepWait, term.out.since(start))
	}
	out := term.out.since(start)
	switch {
	case !ok:
		t.Fatalf("%s: %q: the shell ended:\n%s", st.where(), st.text, out)
	case status != "0":
		t.Fatalf("%s: %q exited %s:\n%s", st.where(), st.text, status, out)
	case cliError.MatchString(out) || redfishError.MatchString(out):
		t.Fatalf("%s: %q printed an error:\n%s", st.where(), st.text, out)
	}
	return out
}
