package layers

import (
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "rackpool"

// graph maps each package of the module (relative to it) to the module's
// packages it imports, tests left out.
func graph(t *testing.T) map[string][]string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to list the module's imports: %v", err)
	}
	cmd := exec.Command(goBin, "list", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", "./...")
	cmd.Dir = filepath.Join("..", "..")
	out, err := cmd.Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	g := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		pkg, ok := relative(f[0])
		if !ok {
			continue
		}
		g[pkg] = []string{}
		for _, imp := range f[1:] {
			if rel, ok := relative(imp); ok {
				g[pkg] = append(g[pkg], rel)
			}
		}
	}
	if len(g) < 20 {
		t.Fatalf("go list found only %d packages; is it run at the module's root?", len(g))
	}
	return g
}

func relative(path string) (string, bool) {
	if path == module {
		return ".", true
	}
	rel, ok := strings.CutPrefix(path, module+"/")
	return rel, ok
}

// above reports whether pkg sits above every layer (commands, benchmarks,
// end-to-end tests).
func above(pkg string) bool {
	return pkg == "." || match("cmd/...", pkg) || match("bench/...", pkg) || pkg == "e2e"
}

// match reports whether pkg is pattern, or below it when pattern ends in
// "/...".
func match(pattern, pkg string) bool {
	if dir, ok := strings.CutSuffix(pattern, "/..."); ok {
		return pkg == dir || strings.HasPrefix(pkg, dir+"/")
	}
	return pkg == pattern
}

// layerOf is the index in layers of pkg's layer, -1 if it is in none. An
// exact pattern wins over "/..." ones, and the longest of those wins.
func layerOf(layers []Layer, pkg string) int {
	best, bestLen := -1, -1
	for i, l := range layers {
		for _, p := range l.Packages {
			if !match(p, pkg) {
				continue
			}
			n := len(p)
			if p == pkg {
				n = 1 << 20
			}
			if n > bestLen {
				best, bestLen = i, n
			}
		}
	}
	return best
}

// check returns one line per rule the graph breaks.
func check(g map[string][]string, layers []Layer, apiImporters []string) []string {
	var bad []string
	pkgs := make([]string, 0, len(g))
	for p := range g {
		pkgs = append(pkgs, p)
	}
	slices.Sort(pkgs)
	for _, pkg := range pkgs {
		top := above(pkg)
		from := layerOf(layers, pkg)
		if !top && from < 0 {
			bad = append(bad, pkg+" is in no layer: add it to layers.Layers")
			continue
		}
		for _, imp := range g[pkg] {
			if imp == "api" && !top && !slices.ContainsFunc(apiImporters, func(p string) bool { return match(p, pkg) }) {
				bad = append(bad, pkg+" imports api, which only the Redfish service and its client-side packages may")
			}
			if match("internal/fabric/...", pkg) && match("internal/redfish/...", imp) {
				bad = append(bad, pkg+" imports the northbound service "+imp)
			}
			if top {
				continue
			}
			if above(imp) {
				bad = append(bad, pkg+" imports "+imp+", which sits above every layer")
				continue
			}
			to := layerOf(layers, imp)
			if to > from {
				bad = append(bad, pkg+" ("+layers[from].Name+") imports "+imp+" from a layer above ("+layers[to].Name+")")
			}
		}
	}
	return bad
}

// TestLayers: every package of the module is in a layer and imports only
// its own layer and those below; api and the northbound service are
// imported only where the rules allow.
func TestLayers(t *testing.T) {
	for _, b := range check(graph(t), Layers, APIImporters) {
		t.Error(b)
	}
}

// TestCheckCatches: the checker finds each kind of wrong import (so that
// TestLayers passing means something).
func TestCheckCatches(t *testing.T) {
	layers := []Layer{{"low", []string{"internal/clock", "internal/fabric"}}, {"mid", []string{"api", "internal/fabric/...", "internal/topology"}},
		{"high", []string{"internal/redfish/..."}}}
	g := map[string][]string{
		"internal/clock":          {"internal/topology"},                  // up a layer
		"internal/topology":       {"api"},                                // api outside its importers
		"internal/fabric/x":       {"internal/redfish/y", "cmd/rackpool"}, // fabric -> service; up to a command
		"internal/fabric":         {},                                     // exact pattern wins over internal/fabric/...
		"internal/newpkg":         {},                                     // in no layer
		"internal/redfish/y":      {"api", "internal/clock"},              // allowed
		"cmd/rackpool":            {"internal/redfish/y", "api"},          // commands may import anything
		"internal/fabric/ok":      {"internal/fabric", "internal/clock"},
		"internal/redfish/odata2": {"internal/fabric/x"},
	}
	got := check(g, layers, []string{"internal/redfish/..."})
	want := []string{
		"internal/clock (low) imports internal/topology from a layer above (mid)",
		"internal/fabric/x imports the northbound service internal/redfish/y",
		"internal/fabric/x (mid) imports internal/redfish/y from a layer above (high)",
		"internal/fabric/x imports cmd/rackpool, which sits above every layer",
		"internal/newpkg is in no layer: add it to layers.Layers",
		"internal/topology imports api, which only the Redfish service and its client-side packages may",
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("check found\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}
