package redfish_test

import (
	"testing"

	"rackpool/internal/topology"
)

// BenchmarkExpandBlocks reads one page of every resource block of ten
// generated racks (1,000 blocks), and of their systems, with and without
// $expand=.: what inlining the members costs over listing their links
// (issue 40's target: at most 4x).
func BenchmarkExpandBlocks(b *testing.B) {
	top, err := topology.Parse("generated", topology.GenerateRacks(10))
	if err != nil {
		b.Fatal(err)
	}
	s := newServiceOn(b, top)
	for _, q := range []struct{ name, query string }{
		{"links", blocksColl + "?$top=1000"},
		{"expanded", blocksColl + "?$top=1000&$expand=."},
		{"systems-links", systemsPath + "?$top=1000"},
		{"systems-expanded", systemsPath + "?$top=1000&$expand=."},
	} {
		b.Run(q.name, func(b *testing.B) {
			s.must(200, "GET", q.query, nil, admin)
			for b.Loop() {
				s.must(200, "GET", q.query, nil, admin)
			}
		})
	}
}
