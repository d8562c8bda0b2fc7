//go:build linux && (amd64 || arm64 || riscv64 || loong64)

package pager

import (
	"hash/crc32"
	"testing"
)

// fill writes a pattern that differs in every page and round.
func fill(b []byte, seed uint32) {
	for i := 0; i+8 <= len(b); i += 8 {
		v := uint64(i)*0x9E3779B97F4A7C15 ^ uint64(seed)<<32
		for k := range 8 {
			b[i+k] = byte(v >> (8 * k))
		}
	}
}

func TestSurvivesEviction(t *testing.T) {
	const size = 4 << 20
	n := startNode(t, size)
	p := n.open(t, size, size/4, nil)
	want := make([]byte, size)
	fill(want, 1)
	err := p.Access(func(r []byte) {
		copy(r, want)
	})
	if err != nil {
		t.Fatalf("Access: %v", err)
	}
	var got uint32
	if err := p.Access(func(r []byte) { got = crc32.ChecksumIEEE(r) }); err != nil {
		t.Fatalf("Access: %v", err)
	}
	if w := crc32.ChecksumIEEE(want); got != w {
		t.Fatalf("checksum %08x after eviction, want %08x", got, w)
	}
	s := p.Stats()
	t.Logf("%+v", s)
}
