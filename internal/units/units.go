// Package units parses and formats byte sizes, the one way rackpool reads
// and writes them (topology files, CLI flags, benchmarks, reports).
//
// Decision: SI prefixes are decimal and IEC prefixes binary, as the
// standards and drive vendors have them: KB = 1,000 bytes, KiB = 1,024
// bytes (so "3.84TB" is a drive's label and "512GiB" a memory module's).
// Unit names are case-insensitive ("64mib" = "64MiB"); a bare number is
// bytes. A bare prefix ("4k", "64m") is refused, because it reads as
// either; the error says which to write.
package units

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Byte multiples.
const (
	KiB int64 = 1 << (10 * (iota + 1))
	MiB
	GiB
	TiB
	PiB
)

var multipliers = map[string]float64{
	"": 1, "b": 1,
	"kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12, "pb": 1e15,
	"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40, "pib": 1 << 50,
}

// ParseBytes parses a size such as 4096, 64MiB, 512GiB or 3.84TB.
// Fractions are allowed when the result is a whole number of bytes.
func ParseBytes(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.') {
		i++
	}
	if i == 0 {
		return 0, fmt.Errorf("%q is not a size (e.g. 4096, 64MiB, 3.84TB)", s)
	}
	v, err := strconv.ParseFloat(t[:i], 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a size (e.g. 4096, 64MiB, 3.84TB)", s)
	}
	unit := strings.ToLower(strings.TrimSpace(t[i:]))
	mult, ok := multipliers[unit]
	if !ok {
		if p := strings.TrimSuffix(unit, "b"); len(p) == 1 && strings.Contains("kmgtp", p) {
			up := strings.ToUpper(p)
			return 0, fmt.Errorf("%q: write %siB for powers of 1024 or %sB for powers of 1000", s, up, up)
		}
		return 0, fmt.Errorf("%q: unknown unit %q (use B, KB, MB, GB, TB, PB or KiB, MiB, GiB, TiB, PiB)", s, t[i:])
	}
	n := v * mult
	if n >= math.MaxInt64/2 {
		return 0, fmt.Errorf("%q is too large", s)
	}
	if n != math.Trunc(n) {
		return 0, fmt.Errorf("%q is not a whole number of bytes", s)
	}
	return int64(n), nil
}

// ParsePositive is ParseBytes for sizes that must be more than zero (a
// lease, a cache tier).
func ParsePositive(s string) (uint64, error) {
	n, err := ParseBytes(s)
	if err != nil {
		return 0, err
	}
	if n <= 0 {
		return 0, fmt.Errorf("size %q must be positive", s)
	}
	return uint64(n), nil
}

// FormatBytes renders n in the largest binary unit that divides it
// exactly: 8589934592 is "8GiB", 1536 is "1536B" (ParseBytes reads it
// back to n).
func FormatBytes(n int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB"}
	i := 0
	for n != 0 && n%1024 == 0 && i < len(units)-1 {
		n /= 1024
		i++
	}
	return strconv.FormatInt(n, 10) + units[i]
}
