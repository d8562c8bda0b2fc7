package captoken

import (
	"bytes"
	"encoding/base64"
	"math"
	"strings"
	"testing"
	"time"
)

// testKey is a fixed key so that failures reproduce.
var testKey = Key(bytes.Repeat([]byte{0x5a}, KeySize))

func open(k Key, token string) ([]byte, error) {
	var buf [64]byte
	return k.Open(buf[:0], token)
}

func TestSealOpen(t *testing.T) {
	for _, p := range [][]byte{{1}, []byte("payload-12"), bytes.Repeat([]byte{0xff}, 64)} {
		tok := testKey.Seal(p)
		if strings.ContainsAny(tok, "+/= \n") || strings.Count(tok, ".") != 1 {
			t.Errorf("token %q is not unpadded base64url with one dot", tok)
		}
		if len(tok) > MaxLen(len(p)) {
			t.Errorf("token of %d bytes is %d long, MaxLen says %d", len(p), len(tok), MaxLen(len(p)))
		}
		got, err := open(testKey, tok)
		if err != nil || !bytes.Equal(got, p) {
			t.Errorf("Open(Seal(%x)) = %x, %v", p, got, err)
		}
		if got, err := Peek(make([]byte, 0, 64), tok); err != nil || !bytes.Equal(got, p) {
			t.Errorf("Peek(Seal(%x)) = %x, %v", p, got, err)
		}
	}
}

// TestSealFixed pins the wire format: the MAC is HMAC-SHA256 of the raw
// payload, both parts unpadded base64url (the expected text computed apart,
// with Python's hmac and base64 modules).
func TestSealFixed(t *testing.T) {
	const want = "AQID.s3JVfdpGUJi4uMuVu1Tjeagbn9o4L9dHaAHOTiigKvc"
	if got := testKey.Seal([]byte{1, 2, 3}); got != want {
		t.Fatalf("Seal = %q, want %q", got, want)
	}
}

func TestOpenRejects(t *testing.T) {
	tok := testKey.Seal([]byte("payload-1"))
	body, sig, _ := strings.Cut(tok, ".")
	enc := base64.RawURLEncoding
	payload, _ := enc.DecodeString(body)
	mac, _ := enc.DecodeString(sig)
	flip := func(b []byte, i int) []byte {
		b = bytes.Clone(b)
		b[i] ^= 1
		return b
	}
	for _, tc := range []struct {
		name, token, want string
		key               Key
	}{
		{"empty", "", "no MAC", testKey},
		{"no dot", body, "no MAC", testKey},
		{"empty mac", body + ".", "MAC encoding", testKey},
		{"empty body", "." + sig, "MAC mismatch", testKey},
		{"tampered payload", enc.EncodeToString(flip(payload, 3)) + "." + sig, "MAC mismatch", testKey},
		{"tampered mac", body + "." + enc.EncodeToString(flip(mac, 31)), "MAC mismatch", testKey},
		{"short mac", body + "." + enc.EncodeToString(mac[:31]), "MAC encoding", testKey},
		{"long mac", body + "." + enc.EncodeToString(append(bytes.Clone(mac), 0)), "MAC encoding", testKey},
		{"wrong key", tok, "MAC mismatch", Key(bytes.Repeat([]byte{0xa5}, KeySize))},
		{"short key", tok, "key is 16 bytes, want 32", testKey[:16]},
		{"padded", body + "=." + sig, "payload encoding", testKey},
		{"std alphabet", strings.NewReplacer("-", "+", "_", "/").Replace(tok) + "+", "MAC encoding", testKey},
		{"two dots", tok + ".x", "MAC encoding", testKey},
		{"garbage", "!!!!.????", "payload encoding", testKey},
		{"payload over the buffer", enc.EncodeToString(make([]byte, 65)) + "." + sig, "too long", testKey},
		{"huge", strings.Repeat("A", 1<<20) + "." + sig, "too long", testKey},
		{"huge mac", body + "." + strings.Repeat("A", 40), "MAC encoding", testKey},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := open(tc.key, tc.token)
			if err == nil || err.Error() != tc.want {
				t.Fatalf("Open = %x, %v; want %q", p, err, tc.want)
			}
		})
	}
}

// TestOneSpelling checks that a token is accepted only as Seal wrote it.
// A last base64url character that carries spare bits has four or sixteen
// spellings that non-strict decoding maps to the same bytes; only the one
// with zero spare bits opens, in the MAC and in the payload (and Peek reads
// the payload as strictly), and the CR and LF a decoder skips are refused.
func TestOneSpelling(t *testing.T) {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	// Payload lengths 2 mod 3 and 1 mod 3 leave 2 and 4 spare bits.
	for _, payload := range []string{"lease-12", "lease-1"} {
		tok := testKey.Seal([]byte(payload))
		body, sig, _ := strings.Cut(tok, ".")
		if len(body)%4 == 0 {
			t.Fatalf("payload %q has no spare bits", payload)
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
				if _, err := open(testKey, spelt); err == nil {
					accepted++
					if spelt != tok {
						t.Errorf("%s: non-canonical spelling %q opened", part.name, spelt)
					}
				}
			}
			if accepted != 1 {
				t.Errorf("payload %q, %s: %d spellings of the last character opened, want 1", payload, part.name, accepted)
			}
		}
		for _, spelt := range []string{body + ".\n" + sig, body + "." + sig + "\r\n", body[:4] + "\n" + body[4:] + "." + sig} {
			if _, err := open(testKey, spelt); err == nil {
				t.Errorf("token with a line break %q opened", spelt)
			}
		}
		last := strings.IndexByte(alphabet, body[len(body)-1])
		noncanonical := body[:len(body)-1] + string(alphabet[last+1]) + "." + sig
		if _, err := Peek(make([]byte, 0, 64), noncanonical); err == nil {
			t.Errorf("Peek(%q) accepted a non-canonical payload", noncanonical)
		}
	}
}

func TestNewKey(t *testing.T) {
	a, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	if a.Check() != nil || bytes.Equal(a, b) {
		t.Fatalf("NewKey: %x, %x", a, b)
	}
	if _, err := open(b, a.Seal([]byte("x"))); err == nil {
		t.Fatal("another random key opened the token")
	}
}

func TestRightsString(t *testing.T) {
	for _, tc := range []struct {
		r Rights
		s string
	}{
		{0, "-"}, {Read, "r"}, {Write, "w"}, {Admin, "a"}, {Read | Write, "rw"}, {Read | Admin, "ra"}, {All, "rwa"},
		{0x18, "Rights(0x18)"},
	} {
		if got := tc.r.String(); got != tc.s {
			t.Errorf("%d.String() = %q, want %q", tc.r, got, tc.s)
		}
	}
}

func TestExpiry(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	for _, tc := range []struct {
		t    time.Time
		want bool
	}{
		{time.Time{}, false},
		{t0, true},
		{time.Unix(0, math.MinInt64), true},
		{time.Unix(0, math.MaxInt64), true},
		{time.Unix(0, math.MaxInt64).Add(time.Nanosecond), false},
		{time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC), false},
	} {
		if got := ValidExpiry(tc.t); got != tc.want {
			t.Errorf("ValidExpiry(%v) = %v, want %v", tc.t, got, tc.want)
		}
	}
	if Expired(t0, t0.Add(-time.Nanosecond)) || !Expired(t0, t0) || !Expired(t0, t0.Add(time.Hour)) {
		t.Error("a token is valid up to, not at, its expiry")
	}
}

func FuzzOpen(f *testing.F) {
	f.Add(testKey.Seal([]byte("payload-1")))
	f.Add("")
	f.Add(".")
	f.Add("AAAA.AAAA")
	f.Fuzz(func(t *testing.T, tok string) {
		p, err := open(testKey, tok)
		if err != nil {
			return
		}
		// Whatever opens must be the one spelling Seal writes.
		if again := testKey.Seal(p); again != tok {
			t.Fatalf("%q opened but Seal spells its payload %q", tok, again)
		}
	})
}
