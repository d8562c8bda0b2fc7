package workload

import "testing"

func TestWorkloads(t *testing.T) {
	a := make([]byte, 1<<16)
	b := make([]byte, 1<<16)
	for _, name := range Names {
		clear(a)
		x, err := Run(name, a, 1000, 7)
		if err != nil {
			t.Fatal(err)
		}
		clear(b)
		y, err := Run(name, b, 1000, 7)
		if err != nil || x != y {
			t.Fatalf("%s: checksums %x and %x (%v)", name, x, y, err)
		}
		clear(b)
		if z, _ := Run(name, b, 1000, 8); z == x {
			t.Fatalf("%s: another seed gives the same checksum", name)
		}
	}
	if _, err := Run("nope", a, 1, 1); err == nil {
		t.Fatal("unknown workload accepted")
	}
}
