package memory

import (
	"bytes"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"rackpool/internal/captoken"
	"rackpool/internal/clock"
)

var t0 = time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC)

// testKey is a fixed key so that failures reproduce.
var testKey = Key(bytes.Repeat([]byte{0x5a}, KeySize))

func testClaims() Claims {
	return Claims{
		Lease:  "lease-1",
		Node:   "mem0",
		Offset: 1 << 20,
		Length: 64 << 10,
		Rights: RightRead | RightWrite,
		Expiry: t0.Add(time.Hour),
	}
}

func mustSign(t testing.TB, k Key, c Claims) string {
	t.Helper()
	tok, err := k.Sign(c)
	if err != nil {
		t.Fatalf("Sign(%+v): %v", c, err)
	}
	return tok
}

func TestTokenRoundTrip(t *testing.T) {
	for _, c := range []Claims{
		testClaims(),
		{Lease: "l", Node: "n", Offset: 0, Length: 1, Rights: RightAdmin, Expiry: time.Unix(0, 1)},
		{Lease: strings.Repeat("x", 255), Node: strings.Repeat("y", 255), Offset: 1<<64 - 2, Length: 1,
			Rights: RightRead | RightWrite | RightAdmin, Expiry: t0},
	} {
		tok := mustSign(t, testKey, c)
		got, err := testKey.Verify(tok, c.Expiry.Add(-time.Nanosecond))
		if err != nil {
			t.Fatalf("Verify: %v", err)
		}
		if got.Lease != c.Lease || got.Node != c.Node || got.Offset != c.Offset || got.Length != c.Length ||
			got.Rights != c.Rights || !got.Expiry.Equal(c.Expiry) {
			t.Errorf("round trip: got %+v, want %+v", got, c)
		}
		if strings.ContainsAny(tok, "+/= \n") {
			t.Errorf("token %q is not unpadded base64url", tok)
		}
	}
}

// TestTokenWireFormat checks that a token signed before the token code
// moved to internal/captoken (this one, by that code, from testKey and
// testClaims) still verifies, and that Sign still spells the same claims
// the same way: tokens held across an upgrade keep working.
func TestTokenWireFormat(t *testing.T) {
	const old = "AQMAAAAAABAAAAAAAAAAAQAAGkdEGZUp0gYHbGVhc2UtMQRtZW0w.ej8hzoRmVwbTkSZxU6Rd0DJoXvx1xNvF73lowpgIaGk"
	c := testClaims()
	got, err := testKey.Verify(old, t0)
	if err != nil {
		t.Fatalf("Verify(token from before): %v", err)
	}
	if got.Lease != c.Lease || got.Node != c.Node || got.Offset != c.Offset || got.Length != c.Length ||
		got.Rights != c.Rights || !got.Expiry.Equal(c.Expiry) {
		t.Errorf("claims of the token from before: %+v, want %+v", got, c)
	}
	if tok := mustSign(t, testKey, c); tok != old {
		t.Errorf("Sign = %q, want the spelling from before %q", tok, old)
	}
	// The holder reads its own claims from the token as the server does.
	if peeked, err := peekClaims(old); err != nil || peeked != got {
		t.Errorf("peekClaims = %+v, %v; want %+v", peeked, err, got)
	}
}

func TestTokenExpiry(t *testing.T) {
	c := testClaims()
	tok := mustSign(t, testKey, c)
	clk := clock.NewManual(c.Expiry.Add(-time.Second))
	if _, err := testKey.Verify(tok, clk.Now()); err != nil {
		t.Fatalf("before expiry: %v", err)
	}
	clk.Advance(time.Second) // exactly at expiry: not valid
	if _, err := testKey.Verify(tok, clk.Now()); !errors.Is(err, ErrExpired) {
		t.Fatalf("at expiry: got %v, want ErrExpired", err)
	}
	clk.Advance(time.Hour)
	if _, err := testKey.Verify(tok, clk.Now()); !errors.Is(err, ErrExpired) {
		t.Fatalf("after expiry: got %v, want ErrExpired", err)
	}
}

// TestTokenRejects: what captoken refuses (its tests cover the framing)
// comes back as ErrBadToken, and so does a validly MACed payload that is
// not a memory token.
func TestTokenRejects(t *testing.T) {
	tok := mustSign(t, testKey, testClaims())
	body, sig, _ := strings.Cut(tok, ".")
	enc := base64.RawURLEncoding
	payload, _ := enc.DecodeString(body)

	flip := func(b []byte, i int) []byte {
		b = bytes.Clone(b)
		b[i] ^= 1
		return b
	}
	otherKey := Key(bytes.Repeat([]byte{0xa5}, KeySize))
	// A validly MACed payload with a bad version, and one with trailing bytes.
	badVersion := flip(payload, 0)
	trailing := append(bytes.Clone(payload), 0)
	macd := func(p []byte) string { return captoken.Key(testKey).Seal(p) }

	for _, tc := range []struct {
		name  string
		key   Key
		token string
	}{
		{"empty", testKey, ""},
		{"tampered rights", testKey, enc.EncodeToString(flip(payload, 1)) + "." + sig},
		{"wrong key", otherKey, tok},
		{"short key", testKey[:16], tok},
		{"huge", testKey, strings.Repeat("A", 1<<20) + "." + sig},
		{"bad version", testKey, macd(badVersion)},
		{"unknown rights", testKey, macd(append([]byte{payload[0], 8}, payload[2:]...))},
		{"trailing bytes", testKey, macd(trailing)},
		{"short payload", testKey, macd(payload[:20])},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.key.Verify(tc.token, t0)
			if !errors.Is(err, ErrBadToken) {
				t.Fatalf("got %v, want ErrBadToken", err)
			}
		})
	}
}

func TestSignRejects(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Claims)
	}{
		{"no lease", func(c *Claims) { c.Lease = "" }},
		{"long lease", func(c *Claims) { c.Lease = strings.Repeat("l", 256) }},
		{"no node", func(c *Claims) { c.Node = "" }},
		{"empty region", func(c *Claims) { c.Length = 0 }},
		{"overflow", func(c *Claims) { c.Offset = 1<<64 - 1 }},
		{"no rights", func(c *Claims) { c.Rights = 0 }},
		{"unknown rights", func(c *Claims) { c.Rights = 8 }},
		{"no expiry", func(c *Claims) { c.Expiry = time.Time{} }},
		{"expiry out of range", func(c *Claims) { c.Expiry = time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testClaims()
			tc.edit(&c)
			if tok, err := testKey.Sign(c); err == nil {
				t.Fatalf("Sign accepted %+v: %q", c, tok)
			}
		})
	}
	if _, err := Key([]byte("short")).Sign(testClaims()); err == nil {
		t.Error("Sign accepted a short key")
	}
}

func TestRights(t *testing.T) {
	for _, tc := range []struct {
		r Rights
		s string
	}{
		{0, "-"},
		{RightRead, "r"},
		{RightWrite, "w"},
		{RightAdmin, "a"},
		{RightRead | RightWrite, "rw"},
		{RightRead | RightAdmin, "ra"},
		{RightRead | RightWrite | RightAdmin, "rwa"},
	} {
		if got := tc.r.String(); got != tc.s {
			t.Errorf("%d.String() = %q, want %q", tc.r, got, tc.s)
		}
		got, err := ParseRights(tc.s)
		if err != nil || got != tc.r {
			t.Errorf("ParseRights(%q) = %v, %v; want %v", tc.s, got, err, tc.r)
		}
	}
	if got, err := ParseRights("awr"); err != nil || got != RightRead|RightWrite|RightAdmin {
		t.Errorf("ParseRights(awr) = %v, %v", got, err)
	}
	for _, s := range []string{"", "x", "rr", "rwx", "R", "r w", "--"} {
		if r, err := ParseRights(s); err == nil {
			t.Errorf("ParseRights(%q) = %v, want an error", s, r)
		}
	}
	if s := Rights(0x18).String(); s != "Rights(0x18)" {
		t.Errorf("unknown bits: %q", s)
	}
}

func FuzzToken(f *testing.F) {
	f.Add(mustSign(f, testKey, testClaims()))
	f.Add("")
	f.Add(".")
	f.Add("AAAA.AAAA")
	f.Add(strings.Repeat("A", 800) + "." + strings.Repeat("B", 43))
	f.Fuzz(func(t *testing.T, tok string) {
		c, err := testKey.Verify(tok, t0)
		if err != nil {
			if !errors.Is(err, ErrBadToken) && !errors.Is(err, ErrExpired) {
				t.Fatalf("Verify error %v wraps neither ErrBadToken nor ErrExpired", err)
			}
			return
		}
		// Whatever verifies must re-sign to the same token (one spelling
		// per claim) that verifies the same.
		tok2, err := testKey.Sign(c)
		if err != nil {
			t.Fatalf("claims %+v verified but do not sign: %v", c, err)
		}
		if tok2 != tok {
			t.Fatalf("%q verified but Sign spells its claims %q", tok, tok2)
		}
		c2, err := testKey.Verify(tok2, t0)
		if err != nil || c2 != c {
			t.Fatalf("re-signed claims differ: %+v, %v", c2, err)
		}
	})
}
