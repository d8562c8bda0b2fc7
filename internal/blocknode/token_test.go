package blocknode

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"time"

	"rackpool/internal/captoken"
)

func TestTokenRoundTripAndForgery(t *testing.T) {
	k, _ := NewKey()
	other, _ := NewKey()
	now := time.Unix(1_800_000_000, 0)
	c := Claims{Drive: "hdd3", Epoch: 7, Rights: RightRead | RightWrite, Expiry: now.Add(time.Minute), Generation: 5}
	tok, err := k.Sign(c)
	if err != nil {
		t.Fatal(err)
	}
	got, err := k.Verify(tok, now)
	if err != nil || got.Drive != "hdd3" || got.Epoch != 7 || got.Rights != c.Rights || !got.Expiry.Equal(c.Expiry) || got.Generation != 5 {
		t.Fatalf("Verify = %+v, %v", got, err)
	}
	if _, err := k.Verify(tok, c.Expiry); !errors.Is(err, ErrExpired) {
		t.Errorf("at expiry: %v, want ErrExpired", err)
	}
	if _, err := other.Verify(tok, now); !errors.Is(err, ErrBadToken) {
		t.Errorf("another key's token: %v, want ErrBadToken", err)
	}
	// Flip every character of the payload: never accepted.
	body, sig, _ := strings.Cut(tok, ".")
	for i := range body {
		b := []byte(body)
		b[i] ^= 1
		if _, err := k.Verify(string(b)+"."+sig, now); err == nil {
			t.Fatalf("a token with payload byte %d changed verified", i)
		}
	}
	for _, bad := range []string{"", ".", "x", tok + "x", strings.Repeat("A", 1000) + "." + sig} {
		if _, err := k.Verify(bad, now); !errors.Is(err, ErrBadToken) {
			t.Errorf("Verify(%.20q) = %v, want ErrBadToken", bad, err)
		}
	}
	for _, bad := range []Claims{{Epoch: 1, Rights: RightRead, Expiry: now}, {Drive: "a@b", Epoch: 1, Rights: RightRead, Expiry: now},
		{Drive: "d", Rights: RightRead, Expiry: now}, {Drive: "d", Epoch: 1, Expiry: now}, {Drive: "d", Epoch: 1, Rights: RightRead},
		// Write rights name the write reservation's generation; read-only
		// rights name none.
		{Drive: "d", Epoch: 1, Rights: RightWrite, Expiry: now}, {Drive: "d", Epoch: 1, Rights: RightRead | RightWrite, Expiry: now},
		{Drive: "d", Epoch: 1, Rights: RightRead, Expiry: now, Generation: 1}} {
		if _, err := k.Sign(bad); err == nil {
			t.Errorf("Sign(%+v) succeeded", bad)
		}
	}
	d, tk, ok := SplitExportName(ExportName("hdd3", tok))
	if !ok || d != "hdd3" || tk != tok {
		t.Errorf("export name round trip: %q %q %v", d, tk, ok)
	}
}

func FuzzVerify(f *testing.F) {
	k := Key(make([]byte, KeySize))
	tok, _ := k.Sign(Claims{Drive: "hdd1", Epoch: 1, Rights: RightRead, Expiry: time.Unix(2e9, 0)})
	f.Add(tok)
	f.Add("")
	f.Add("AQ.AA")
	f.Fuzz(func(t *testing.T, s string) {
		c, err := k.Verify(s, time.Unix(1e9, 0))
		if err == nil {
			if again, err := k.Sign(c); err != nil || again != s {
				t.Fatalf("verified %q but it does not re-sign to itself (%q, %v)", s, again, err)
			}
		}
	})
}

// TestTokenVersionOneRefused: a version 1 token (before write
// reservations; no generation) is refused even with a valid MAC: it
// would name no reservation to fence.
func TestTokenVersionOneRefused(t *testing.T) {
	k, _ := NewKey()
	now := time.Unix(1_800_000_000, 0)
	p := []byte{1, byte(RightRead | RightWrite)}
	p = binary.BigEndian.AppendUint64(p, 7)
	p = binary.BigEndian.AppendUint64(p, uint64(now.Add(time.Minute).UnixNano()))
	p = append(p, 4)
	p = append(p, "hdd3"...)
	tok := captoken.Key(k).Seal(p)
	if c, err := k.Verify(tok, now); !errors.Is(err, ErrBadToken) {
		t.Fatalf("version 1 token: %+v, %v; want ErrBadToken", c, err)
	}
}

// TestTokenWireFormat checks that tokens signed before the token code
// moved to internal/captoken (these, by that code) still verify with the
// same claims, and that Sign still spells those claims the same way:
// drive tokens held across an upgrade keep working.
func TestTokenWireFormat(t *testing.T) {
	k := Key(bytes.Repeat([]byte{0x5a}, KeySize))
	expiry := time.Date(2030, 1, 2, 4, 4, 5, 6, time.UTC)
	for _, tc := range []struct {
		token string
		want  Claims
	}{
		{"AgMAAAAAAAAABxpHRBmVKdIGAAAAAAAAAAUEaGRkMw.A5I2yLKBSOQ0wLFu9LUF86SDbW7p2fi-3q5zb6Enqyk",
			Claims{Drive: "hdd3", Epoch: 7, Rights: RightRead | RightWrite, Expiry: expiry, Generation: 5}},
		{"AgEAAAAAAAAACRpHRBmVKdIGAAAAAAAAAAAFc3NkMTI.SGlNbmundGQhQiy2rczx0LozdIcQpyHQMhluWfHYrXI",
			Claims{Drive: "ssd12", Epoch: 9, Rights: RightRead, Expiry: expiry}},
	} {
		got, err := k.Verify(tc.token, expiry.Add(-time.Minute))
		if err != nil {
			t.Fatalf("Verify(token from before): %v", err)
		}
		if got.Drive != tc.want.Drive || got.Epoch != tc.want.Epoch || got.Rights != tc.want.Rights ||
			!got.Expiry.Equal(tc.want.Expiry) || got.Generation != tc.want.Generation {
			t.Errorf("claims of %q: %+v, want %+v", tc.token, got, tc.want)
		}
		if tok, err := k.Sign(tc.want); err != nil || tok != tc.token {
			t.Errorf("Sign(%+v) = %q, %v; want the spelling from before %q", tc.want, tok, err, tc.token)
		}
	}
}
