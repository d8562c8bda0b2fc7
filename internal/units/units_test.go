package units_test

import (
	"strings"
	"testing"

	"rackpool/internal/units"
)

func TestParseBytes(t *testing.T) {
	good := map[string]int64{
		"4096": 4096, "0": 0, "4096B": 4096, " 64MiB ": 64 << 20, "64mib": 64 << 20, "64 MiB": 64 << 20,
		"512GiB": 512 << 30, "3.84TB": 3_840_000_000_000, "1KB": 1000, "1kb": 1000, "1KiB": 1024,
		"1.5KiB": 1536, "2PiB": 2 << 50, "1PB": 1e15, "8GB": 8e9,
	}
	for in, want := range good {
		got, err := units.ParseBytes(in)
		if err != nil || got != want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	bad := map[string]string{
		"":         "not a size",
		"MiB":      "not a size",
		"-1":       "not a size",
		"4k":       "write KiB for powers of 1024 or KB for powers of 1000",
		"64m":      "write MiB",
		"1.5B":     "not a whole number of bytes",
		"0.1KiB":   "not a whole number of bytes",
		"8 GiBs":   "unknown unit",
		"1e3":      "unknown unit",
		"9000PiB":  "too large",
		"1.2.3GiB": "not a size",
	}
	for in, want := range bad {
		if n, err := units.ParseBytes(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseBytes(%q) = %d, %v; want an error saying %q", in, n, err, want)
		}
	}
}

func TestParsePositive(t *testing.T) {
	if n, err := units.ParsePositive("1MiB"); err != nil || n != 1<<20 {
		t.Errorf("1MiB: %d %v", n, err)
	}
	if _, err := units.ParsePositive("0"); err == nil || !strings.Contains(err.Error(), "must be positive") {
		t.Errorf("0: %v", err)
	}
}

func TestFormatBytesRoundTrips(t *testing.T) {
	cases := map[int64]string{0: "0B", 1: "1B", 1536: "1536B", 4096: "4KiB", 8 << 30: "8GiB", 3 << 40: "3TiB", 5 << 50: "5PiB",
		1 << 60: "1024PiB", 3_840_000_000_000: "3750000000KiB"}
	for n, want := range cases {
		got := units.FormatBytes(n)
		if got != want {
			t.Errorf("FormatBytes(%d) = %q, want %q", n, got, want)
		}
		if back, err := units.ParseBytes(got); err != nil || back != n {
			t.Errorf("ParseBytes(FormatBytes(%d)) = %d, %v", n, back, err)
		}
	}
}
