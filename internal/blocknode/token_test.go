package blocknode

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestTokenRoundTripAndForgery(t *testing.T) {
	k, _ := NewKey()
	other, _ := NewKey()
	now := time.Unix(1_800_000_000, 0)
	c := Claims{Drive: "hdd3", Epoch: 7, Rights: RightRead | RightWrite, Expiry: now.Add(time.Minute)}
	tok, err := k.Sign(c)
	if err != nil {
		t.Fatal(err)
	}
	got, err := k.Verify(tok, now)
	if err != nil || got.Drive != "hdd3" || got.Epoch != 7 || got.Rights != c.Rights || !got.Expiry.Equal(c.Expiry) {
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
		{Drive: "d", Rights: RightRead, Expiry: now}, {Drive: "d", Epoch: 1, Expiry: now}, {Drive: "d", Epoch: 1, Rights: RightRead}} {
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
