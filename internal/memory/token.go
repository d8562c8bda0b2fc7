package memory

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"rackpool/internal/captoken"
)

// Rights is the set of operations a token allows: any of RightRead,
// RightWrite and RightAdmin.
type Rights = captoken.Rights

// The rights a token can carry.
const (
	RightRead  = captoken.Read  // READ
	RightWrite = captoken.Write // WRITE and APPEND
	RightAdmin = captoken.Admin // ZERO the region (control plane only)

	rightsAll = RightRead | RightWrite | RightAdmin
)

// ParseRights parses the String form: any of the letters r, w and a, each at
// most once, in any order, or "-" for no rights.
func ParseRights(s string) (Rights, error) {
	if s == "-" {
		return 0, nil
	}
	if s == "" {
		return 0, errors.New("memory: empty rights")
	}
	var r Rights
	for i := 0; i < len(s); i++ {
		var bit Rights
		switch s[i] {
		case 'r':
			bit = RightRead
		case 'w':
			bit = RightWrite
		case 'a':
			bit = RightAdmin
		default:
			return 0, fmt.Errorf("memory: rights %q: unknown letter %q", s, s[i])
		}
		if r&bit != 0 {
			return 0, fmt.Errorf("memory: rights %q: %q repeated", s, s[i])
		}
		r |= bit
	}
	return r, nil
}

// Claims is what a token grants: access with Rights to the Length bytes at
// Offset of memnode Node's capacity, under lease Lease, until Expiry.
type Claims struct {
	Lease  string    // lease ID
	Node   string    // memnode ID the region lives on
	Offset uint64    // region start within the node's capacity
	Length uint64    // region length in bytes
	Rights Rights    // operations allowed
	Expiry time.Time // token not valid at or after this instant
}

// validate reports why c cannot be put in a token, if it cannot.
func (c Claims) validate() error {
	switch {
	case c.Lease == "" || len(c.Lease) > maxIDLen:
		return fmt.Errorf("memory: lease ID must be 1 to %d bytes", maxIDLen)
	case c.Node == "" || len(c.Node) > maxIDLen:
		return fmt.Errorf("memory: node ID must be 1 to %d bytes", maxIDLen)
	case c.Length == 0:
		return errors.New("memory: region length must be positive")
	case c.Offset > math.MaxUint64-c.Length:
		return errors.New("memory: region end overflows")
	case c.Rights == 0 || c.Rights&^rightsAll != 0:
		return fmt.Errorf("memory: invalid rights %v", c.Rights)
	case c.Expiry.IsZero():
		return errors.New("memory: token needs an expiry")
	case !captoken.ValidExpiry(c.Expiry):
		return errors.New("memory: expiry out of range")
	}
	return nil
}

// Key is an HMAC-SHA256 key shared by the control plane, which signs tokens,
// and the memnodes, which verify them. It is KeySize bytes long.
type Key []byte

// KeySize is the length of a Key in bytes.
const KeySize = captoken.KeySize

// Token format limits.
const (
	tokenVersion = 1
	maxIDLen     = 255
	// tokenFixed is the payload size without the two IDs.
	tokenFixed = 1 + 1 + 8 + 8 + 8 + 1 + 1
	// maxPayload is the longest payload, with both IDs at their longest.
	maxPayload = tokenFixed + 2*maxIDLen
	// maxTokenLen bounds the token text; anything longer is refused
	// before decoding (an AUTH frame longer than it too: doc.go).
	maxTokenLen = (maxPayload+2)/3*4 + 1 + (sha256.Size+2)/3*4
)

// NewKey returns a new random key from crypto/rand.
func NewKey() (Key, error) {
	k, err := captoken.NewKey() // crypto/rand does not fail
	return Key(k), err
}

func (k Key) check() error {
	if err := captoken.Key(k).Check(); err != nil {
		return fmt.Errorf("memory: %w", err)
	}
	return nil
}

// Sign returns a token carrying c, MACed with k. It fails if k is not
// KeySize bytes or c is not a valid grant (empty or over-long IDs, empty or
// overflowing region, no or unknown rights, zero expiry).
func (k Key) Sign(c Claims) (string, error) {
	if err := k.check(); err != nil {
		return "", err
	}
	if err := c.validate(); err != nil {
		return "", err
	}
	p := make([]byte, 0, tokenFixed+len(c.Lease)+len(c.Node))
	p = append(p, tokenVersion, byte(c.Rights))
	p = binary.BigEndian.AppendUint64(p, c.Offset)
	p = binary.BigEndian.AppendUint64(p, c.Length)
	p = binary.BigEndian.AppendUint64(p, uint64(c.Expiry.UnixNano()))
	p = append(p, byte(len(c.Lease)))
	p = append(p, c.Lease...)
	p = append(p, byte(len(c.Node)))
	p = append(p, c.Node...)
	return captoken.Key(k).Seal(p), nil
}

// Verify checks token's MAC under k in constant time and returns its claims.
// It returns an error wrapping ErrBadToken if the token is malformed or its
// MAC does not match, and ErrExpired (with the claims) if now is at or after
// the token's expiry. It does not check the node, range or revocation; the
// server does.
func (k Key) Verify(token string, now time.Time) (Claims, error) {
	var buf [maxPayload]byte
	payload, err := captoken.Key(k).Open(buf[:0], token)
	if err != nil {
		return Claims{}, fmt.Errorf("%w: %w", ErrBadToken, err)
	}
	c, err := decodeClaims(payload)
	if err != nil {
		return Claims{}, fmt.Errorf("%w: %w", ErrBadToken, err)
	}
	if captoken.Expired(c.Expiry, now) {
		return c, ErrExpired
	}
	return c, nil
}

// peekClaims returns the claims a token states without checking its MAC:
// for a holder to learn its own region and expiry, never to decide access.
func peekClaims(token string) (Claims, error) {
	var buf [maxPayload]byte
	payload, err := captoken.Peek(buf[:0], token)
	if err != nil {
		return Claims{}, fmt.Errorf("%w: %w", ErrBadToken, err)
	}
	c, err := decodeClaims(payload)
	if err != nil {
		return Claims{}, fmt.Errorf("%w: %w", ErrBadToken, err)
	}
	return c, nil
}

// decodeClaims parses a token payload.
func decodeClaims(p []byte) (Claims, error) {
	if len(p) < tokenFixed {
		return Claims{}, errors.New("short payload")
	}
	if p[0] != tokenVersion {
		return Claims{}, fmt.Errorf("version %d", p[0])
	}
	c := Claims{
		Rights: Rights(p[1]),
		Offset: binary.BigEndian.Uint64(p[2:]),
		Length: binary.BigEndian.Uint64(p[10:]),
		Expiry: time.Unix(0, int64(binary.BigEndian.Uint64(p[18:]))),
	}
	rest := p[26:]
	id := func() (string, bool) {
		if len(rest) < 1 || len(rest) < 1+int(rest[0]) {
			return "", false
		}
		s := string(rest[1 : 1+int(rest[0])])
		rest = rest[1+int(rest[0]):]
		return s, true
	}
	var ok1, ok2 bool
	c.Lease, ok1 = id()
	c.Node, ok2 = id()
	if !ok1 || !ok2 || len(rest) != 0 {
		return Claims{}, errors.New("malformed payload")
	}
	if err := c.validate(); err != nil {
		return Claims{}, err
	}
	return c, nil
}
