package harness_test

import (
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"rackpool/bench/internal/harness"
)

func TestPercentile(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		var out []time.Duration
		for _, x := range v {
			out = append(out, time.Duration(x)*time.Millisecond)
		}
		return out
	}
	tests := []struct {
		name   string
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{"none", nil, 50, 0},
		{"one", ms(7), 99, 7 * time.Millisecond},
		{"median of odd", ms(1, 2, 3, 4, 5), 50, 3 * time.Millisecond},
		{"median of even rounds down", ms(1, 2, 3, 4), 50, 2 * time.Millisecond},
		{"p99 of 100", ms(seq(100)...), 99, 99 * time.Millisecond},
		{"p100 is the largest", ms(1, 2, 3), 100, 3 * time.Millisecond},
		{"p0 is the smallest", ms(1, 2, 3), 0, time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := harness.Percentile(tt.sorted, tt.p); got != tt.want {
				t.Fatalf("Percentile(%v, %v) = %v, want %v", tt.sorted, tt.p, got, tt.want)
			}
		})
	}
}

func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i + 1
	}
	return out
}

func TestWaitDial(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := harness.WaitDial(l.Addr().String(), time.Second, nil); err != nil {
		t.Fatalf("listening address: %v", err)
	}

	sock := filepath.Join(t.TempDir(), "s.sock")
	ul, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ul.Close()
	if err := harness.WaitDial("unix:"+sock, time.Second, nil); err != nil {
		t.Fatalf("listening socket: %v", err)
	}

	free, err := harness.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	gone := errors.New("server exited")
	if err := harness.WaitDial(free, 10*time.Second, func() error { return gone }); err != gone {
		t.Fatalf("exited server: %v, want its error", err)
	}
	start := time.Now()
	err = harness.WaitDial(free, 100*time.Millisecond, func() error { return nil })
	if err == nil || !strings.Contains(err.Error(), "not accepting connections") {
		t.Fatalf("nothing listening: %v", err)
	}
	if d := time.Since(start); d < 100*time.Millisecond {
		t.Fatalf("gave up after %s, before the timeout", d)
	}
}

func TestFreeAddrListens(t *testing.T) {
	addr, err := harness.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(addr, "127.0.0.1:") {
		t.Fatalf("FreeAddr %q not on 127.0.0.1", addr)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("FreeAddr's address is not free: %v", err)
	}
	l.Close()
}

func TestBinaryGiven(t *testing.T) {
	if got := harness.Binary("/opt/rackpool", t.TempDir()); got != "/opt/rackpool" {
		t.Fatalf("Binary with a path given: %q", got)
	}
}

func TestOutputKeepsTheLastBytes(t *testing.T) {
	all := &harness.Output{}
	last := &harness.Output{Max: 8}
	for _, w := range []string{"serve: ", "listening on 127.0.0.1:1\n", "ready\n"} {
		for _, o := range []*harness.Output{all, last} {
			if n, err := o.Write([]byte(w)); n != len(w) || err != nil {
				t.Fatalf("Write(%q) = %d, %v", w, n, err)
			}
		}
	}
	if got, want := all.String(), "serve: listening on 127.0.0.1:1\nready\n"; got != want {
		t.Fatalf("unbounded output %q, want %q", got, want)
	}
	if got, want := last.String(), "1\nready\n"; got != want {
		t.Fatalf("output kept to 8 bytes %q, want %q", got, want)
	}
}
