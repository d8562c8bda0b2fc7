package blocknode

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"time"
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

// TestTokenOneSpelling checks that a drive token is accepted only as Sign
// wrote it: of the spellings of a last base64url character that carries
// spare bits (four or sixteen, all the same bytes to a non-strict decoder)
// only the one with zero spare bits verifies, in the MAC and in the
// payload; the CR and LF a decoder skips are refused too.
func TestTokenOneSpelling(t *testing.T) {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	k := Key(make([]byte, KeySize))
	now := time.Unix(1_800_000_000, 0)
	// Payload lengths 2 and 1 mod 3 leave 2 and 4 spare bits.
	for _, drive := range []string{"hdd31", "hdd3"} {
		tok, err := k.Sign(Claims{Drive: drive, Epoch: 7, Rights: RightRead | RightWrite, Expiry: now.Add(time.Minute), Generation: 2})
		if err != nil {
			t.Fatal(err)
		}
		body, sig, _ := strings.Cut(tok, ".")
		if len(body)%4 == 0 {
			t.Fatalf("payload for %q has no spare bits; pick another drive ID", drive)
		}
		for _, part := range []struct {
			name string
			edit func(last byte) string
		}{
			{"mac", func(b byte) string { return body + "." + sig[:len(sig)-1] + string(b) }},
			{"payload", func(b byte) string { return body[:len(body)-1] + string(b) + "." + sig }},
		} {
			accepted := 0
			for i := range len(alphabet) {
				spelt := part.edit(alphabet[i])
				_, err := k.Verify(spelt, now)
				if err == nil {
					accepted++
					if spelt != tok {
						t.Errorf("%s: non-canonical spelling %q verified", part.name, spelt)
					}
				} else if !errors.Is(err, ErrBadToken) {
					t.Errorf("%s: %v, want ErrBadToken", part.name, err)
				}
			}
			if accepted != 1 {
				t.Errorf("drive %q, %s: %d spellings of the last character verified, want 1", drive, part.name, accepted)
			}
		}
		for _, spelt := range []string{body + ".\n" + sig, body + "." + sig + "\r\n", body[:4] + "\n" + body[4:] + "." + sig} {
			if _, err := k.Verify(spelt, now); !errors.Is(err, ErrBadToken) {
				t.Errorf("token with a line break %q: %v, want ErrBadToken", spelt, err)
			}
		}
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
	tok := tokenEncoding.EncodeToString(p) + "." + tokenEncoding.EncodeToString(k.mac(p))
	if c, err := k.Verify(tok, now); !errors.Is(err, ErrBadToken) {
		t.Fatalf("version 1 token: %+v, %v; want ErrBadToken", c, err)
	}
}
