package slurm

import (
	"strings"
	"testing"
)

// FuzzInputs: hostlists, constraints and configuration files from slurmctld
// or an operator never panic, a hostlist expands to at most maxHostlist
// names, and a configuration either parses or names the file.
func FuzzInputs(f *testing.F) {
	for _, s := range []string{"n[1-3,5],gpu01", "n[0-99999999]", "[", "a]b[", "gpu2&nvme|x*2", "nodes: {n1: {host: h}}",
		"nodes: {n1: {host: h}}\ntemplates: {g: {needs: [\"1 gpu\"]}}\nkeep_warm: {state: /x}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if names, err := ExpandHostlist(s); err == nil && len(names) > maxHostlist {
			t.Fatalf("%q expanded to %d names", s, len(names))
		}
		for _, feat := range ConstraintFeatures(s) {
			if feat == "" || strings.ContainsAny(feat, "&|,") {
				t.Fatalf("%q gave feature %q", s, feat)
			}
		}
		if c, err := ParseConfig("fuzz.yaml", []byte(s)); err == nil && len(c.Nodes) == 0 {
			t.Fatalf("%q parsed with no nodes", s)
		} else if err != nil && !strings.Contains(err.Error(), "fuzz.yaml") {
			t.Fatalf("%q: error %v does not name the file", s, err)
		}
	})
}
