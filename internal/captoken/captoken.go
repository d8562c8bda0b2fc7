// Package captoken frames, MACs and checks capability tokens: the bearer
// credentials the control plane issues and the data-plane servers
// (memnodes, blocknodes) verify locally, without calling back (DESIGN.md,
// rule 7). A token is
//
//	base64url(payload) "." base64url(HMAC-SHA256(key, payload))
//
// in unpadded, strict base64url, so each payload has exactly one spelling
// and a token is safe in an NBD export name or a URL. What the payload says
// (its version byte, rights, IDs, expiry) belongs to the package that
// issues the claims: memory.Claims for memory leases, blocknode.Claims for
// drives. This package owns what they share: the key, the framing, the
// MAC, the rights bits and the expiry range.
package captoken

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
)

// Rights is the set of operations a token allows. Each claims type says
// which of the bits it accepts.
type Rights uint8

// The rights a token can carry.
const (
	Read  Rights = 1 << iota // read the region or drive
	Write                    // change it
	Admin                    // control-plane operations (memory: ZERO the region)

	// All is every right this package knows.
	All = Read | Write | Admin
)

// String returns the rights as letters in the order r, w, a ("r", "rw",
// "rwa", "a"), "-" for none, or a hex form if unknown bits are set.
func (r Rights) String() string {
	if r&^All != 0 {
		return fmt.Sprintf("Rights(%#02x)", uint8(r))
	}
	if r == 0 {
		return "-"
	}
	var b [3]byte
	n := 0
	for _, x := range [...]struct {
		bit    Rights
		letter byte
	}{{Read, 'r'}, {Write, 'w'}, {Admin, 'a'}} {
		if r&x.bit != 0 {
			b[n] = x.letter
			n++
		}
	}
	return string(b[:n])
}

// Key is an HMAC-SHA256 key shared by the control plane, which signs
// tokens, and the servers that verify them. It is KeySize bytes long.
type Key []byte

// KeySize is the length of a Key in bytes.
const KeySize = 32

// NewKey returns a new random key from crypto/rand.
func NewKey() (Key, error) {
	k := make(Key, KeySize)
	if _, err := rand.Read(k); err != nil {
		return nil, fmt.Errorf("new key: %w", err)
	}
	return k, nil
}

// Check reports whether k is KeySize bytes long.
func (k Key) Check() error {
	if len(k) != KeySize {
		return fmt.Errorf("key is %d bytes, want %d", len(k), KeySize)
	}
	return nil
}

func (k Key) mac(payload []byte) []byte {
	h := hmac.New(sha256.New, k)
	h.Write(payload)
	return h.Sum(nil)
}

// encoding is unpadded base64url in strict mode: the bits left over in a
// last character that encodes a partial byte must be zero, so each byte
// string has exactly one spelling. Non-strict decoding accepts four
// spellings of such a character.
var encoding = base64.RawURLEncoding.Strict()

// Seal returns the token carrying payload, MACed with k. The caller has
// checked k (Check) and built a payload it can parse back.
func (k Key) Seal(payload []byte) string {
	var b strings.Builder
	b.Grow(encoding.EncodedLen(len(payload)) + 1 + encoding.EncodedLen(sha256.Size))
	b.WriteString(encoding.EncodeToString(payload))
	b.WriteByte('.')
	b.WriteString(encoding.EncodeToString(k.mac(payload)))
	return b.String()
}

// MaxLen is the length of the longest token whose payload is at most
// maxPayload bytes: anything longer is refused before decoding.
func MaxLen(maxPayload int) int {
	return encoding.EncodedLen(maxPayload) + 1 + encoding.EncodedLen(sha256.Size)
}

// Open checks token's framing and its MAC under k, in constant time, and
// returns the payload, decoded into buf: cap(buf) is the longest payload
// accepted. Its errors say what is wrong in a few words ("too long", "no
// MAC", "payload encoding", "MAC encoding", "MAC mismatch"); the caller
// wraps them in its own bad-token error. It does not parse the payload.
func (k Key) Open(buf []byte, token string) ([]byte, error) {
	if err := k.Check(); err != nil {
		return nil, err
	}
	payload, sig, err := parse(buf, token)
	if err != nil {
		return nil, err
	}
	var sbuf [sha256.Size + 3]byte
	if encoding.DecodedLen(len(sig)) > len(sbuf) {
		return nil, errors.New("too long")
	}
	mac, err := decode(sbuf[:0], sig)
	if err != nil || len(mac) != sha256.Size {
		return nil, errors.New("MAC encoding")
	}
	if !hmac.Equal(k.mac(payload), mac) {
		return nil, errors.New("MAC mismatch")
	}
	return payload, nil
}

// Peek returns the payload a token states without checking its MAC, as
// strictly decoded as Open's: for a holder to learn its own claims, never
// to decide access.
func Peek(buf []byte, token string) ([]byte, error) {
	payload, _, err := parse(buf, token)
	return payload, err
}

// parse cuts token into its payload, decoded into buf, and its MAC text,
// refusing a token too long for a payload of cap(buf) bytes.
func parse(buf []byte, token string) (payload []byte, sig string, err error) {
	if len(token) > MaxLen(cap(buf)) {
		return nil, "", errors.New("too long")
	}
	body, sig, ok := strings.Cut(token, ".")
	if !ok {
		return nil, "", errors.New("no MAC")
	}
	if encoding.DecodedLen(len(body)) > cap(buf) {
		return nil, "", errors.New("too long")
	}
	if payload, err = decode(buf, body); err != nil {
		return nil, "", errors.New("payload encoding")
	}
	return payload, sig, nil
}

// decode decodes the base64url text src into buf (with the capacity for
// it) and refuses every spelling but the one Seal writes: strict mode
// refuses nonzero trailing bits, and the length check refuses the CR and
// LF the decoder skips even in strict mode.
func decode(buf []byte, src string) ([]byte, error) {
	dst := buf[:encoding.DecodedLen(len(src))]
	n, err := encoding.Decode(dst, []byte(src))
	if err != nil {
		return nil, err
	}
	if encoding.EncodedLen(n) != len(src) {
		return nil, errors.New("not canonical base64url")
	}
	return dst[:n], nil
}

// ValidExpiry reports whether t can be an expiry in a payload: set, and
// within the int64 nanoseconds since 1970 a payload carries.
func ValidExpiry(t time.Time) bool {
	return !t.IsZero() && !t.Before(time.Unix(0, math.MinInt64)) && !t.After(time.Unix(0, math.MaxInt64))
}

// Expired reports whether a token that expires at expiry is no longer
// valid at now: it is not valid at or after that instant.
func Expired(expiry, now time.Time) bool { return !now.Before(expiry) }
