package hoststep

import (
	"strings"
	"testing"
)

func FuzzParsers(f *testing.F) {
	for _, s := range []string{
		"/dev/sdc1 /srv/data\\040set ext4 rw 0 0\n",
		"36 25 8:33 / /var/lib/db rw,relatime shared:1 - btrfs /dev/mapper/x rw\n",
		"Filename\tType\tSize\tUsed\tPriority\n/dev/sdc2 partition 1048572 0 -2\n",
		"Undefined 0\nTOTAL_ERR_FATAL 3\n",
		"8000000", "0x10DE", "naa.5000C500A1B2C3D4", "t10.ATA     MODEL   S1ABC", "\\", "- x",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_ = parseMounts([]byte(s))
		_ = parseMountinfo([]byte(s))
		_ = parseSwaps([]byte(s))
		_, _ = parseAERFatal(s)
		_, _ = parseHex(s)
		if n := normID(s); n != "" && (normID(n) != n || len(n) != 6) {
			t.Errorf("normID(%q) = %q, normID of that %q", s, n, normID(n))
		}
		if strings.TrimSpace(s) != "" && normSerial(s) != "" && !serialMatches(s, s) {
			t.Errorf("%q does not match itself", s)
		}
		_ = blockRange(strings.Fields(s))
	})
}

func TestBlockRange(t *testing.T) {
	for in, want := range map[string]string{
		"memory32 memory33 memory34 memory40": "memory32..34,40",
		"memory7":                             "memory7",
		"":                                    "",
		"memory9 memory8 sdb":                 "memory8..9 sdb",
	} {
		if got := blockRange(strings.Fields(in)); got != want {
			t.Errorf("blockRange(%q) = %q, want %q", in, got, want)
		}
	}
}
