package node

import (
	"strings"
	"testing"
)

func TestPageBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "usage: rackpool page"},
		{[]string{"--memnode", "127.0.0.1:1"}, "--memnode needs --token"},
		{[]string{"--token", "x"}, "--token needs --memnode or --map-socket"},
		{[]string{"--map-socket", "/tmp/s"}, "--map-socket needs --token"},
		{[]string{"--map-socket", "/tmp/s", "--token", "t", "--control", "http://x"}, "not both"},
		{[]string{"--memnode", "a:1", "--token", "t", "--mapped"}, "--mapped goes with --control"},
		{[]string{"--memnode", "a:1", "--token", "t", "--map-socket", "/tmp/s", "--tcp"}, "--tcp pages over TCP"},
		{[]string{"--control", "http://x", "--mapped", "--tcp"}, "--tcp pages over TCP"},
		{[]string{"--map-socket", "/tmp/s", "--token", "t", "--size", "4097"}, "multiple of the page size"},
		{[]string{"--memnode", "a:1", "--token", "t", "--control", "http://x"}, "not both"},
		{[]string{"--memnode", "a:1", "--token", "t", "--workload", "bogus"}, `--workload "bogus"`},
		{[]string{"--memnode", "a:1", "--token", "t", "--size", "0"}, "--size"},
		{[]string{"--memnode", "a:1", "--token", "t", "--size", "4097"}, "multiple of the page size"},
		{[]string{"--memnode", "a:1", "--token", "t", "--local", "0%"}, "percentage in (0, 100]"},
		{[]string{"--memnode", "a:1", "--token", "t", "--local", "150%"}, "percentage in (0, 100]"},
		{[]string{"--memnode", "a:1", "--token", "t", "--local", "1%", "--size", "64KiB"}, "less than a page"},
		{[]string{"--memnode", "a:1", "--token", "t", "--local", "128MiB", "--size", "64MiB"}, "more than --size"},
		{[]string{"--memnode", "a:1", "--token", "t", "--local", "lots"}, "--local"},
		{[]string{"--memnode", "a:1", "--token", "t", "--ops", "0"}, "--ops must be positive"},
		{[]string{"--memnode", "a:1", "--token", "t", "extra"}, `unexpected argument "extra"`},
		{[]string{"--memnode", "a:1", "--token", "t", "--prefetch", "3", "--size", "64KiB"}, "prefetch 3"},
	} {
		err := execute(append([]string{"page"}, tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("page %q: %v, want an error containing %q", tc.args, err, tc.want)
		}
	}
}
