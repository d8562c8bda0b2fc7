package offline

import (
	"strings"
	"testing"
)

func TestParseShard(t *testing.T) {
	for _, tc := range []struct {
		in      string
		i, n    int
		wantErr bool
	}{
		{"", 0, 1, false},
		{"0/4", 0, 4, false},
		{"3/4", 3, 4, false},
		{"4/4", 0, 0, true},
		{"-1/4", 0, 0, true},
		{"0/0", 0, 0, true},
		{"1", 0, 0, true},
		{"a/b", 0, 0, true},
	} {
		i, n, err := parseShard(tc.in)
		if (err != nil) != tc.wantErr || i != tc.i || n != tc.n {
			t.Errorf("parseShard(%q) = %d, %d, %v; want %d, %d, error %v", tc.in, i, n, err, tc.i, tc.n, tc.wantErr)
		}
		if err != nil && !strings.Contains(err.Error(), "--shard") {
			t.Errorf("parseShard(%q): %v does not name the flag", tc.in, err)
		}
	}
}

// TestRedact: discover's messages name a service without its credentials.
func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"https://admin:secret@10.0.0.5:443/redfish/v1": "https://10.0.0.5:443/redfish/v1",
		"https://10.0.0.5": "https://10.0.0.5",
		"://bad":           "the service",
	} {
		if got := redact(in); got != want {
			t.Errorf("redact(%q) = %q, want %q", in, got, want)
		}
	}
}
