package blocknode

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"time"

	"rackpool/internal/captoken"
)

// Rights is what a drive token allows: RightRead, RightWrite or both.
type Rights = captoken.Rights

// The rights a token can carry.
const (
	RightRead  = captoken.Read  // READ, BLOCK_STATUS
	RightWrite = captoken.Write // WRITE, TRIM, WRITE_ZEROES, FLUSH

	rightsAll = RightRead | RightWrite
)

// ParseRights parses "r", "w" or "rw" (the empty string is "rw").
func ParseRights(s string) (Rights, error) {
	switch s {
	case "r":
		return RightRead, nil
	case "w":
		return RightWrite, nil
	case "rw", "wr", "":
		return rightsAll, nil
	}
	return 0, fmt.Errorf("rights %q: want r, w or rw", s)
}

// Claims is what a drive token grants: Rights on drive Drive while its
// ownership epoch is Epoch, until Expiry. A blocknode accepts it only for
// a drive the control plane has assigned to it at that epoch, so a token
// issued before the drive moved is worthless once it has.
//
// A token with write rights also names the generation of the drive's
// write reservation it was issued under (positive; a read-only token
// carries 0): a blocknode refuses its writes once it has seen a later
// generation (reserve.go).
type Claims struct {
	Drive      string
	Epoch      uint64
	Rights     Rights
	Expiry     time.Time
	Generation uint64
}

func (c Claims) validate() error {
	switch {
	case c.Drive == "" || len(c.Drive) > maxIDLen:
		return fmt.Errorf("drive ID must be 1 to %d bytes", maxIDLen)
	case strings.ContainsAny(c.Drive, Separator):
		return fmt.Errorf("drive ID %q contains %q", c.Drive, Separator)
	case c.Epoch == 0:
		return errors.New("ownership epoch must be positive")
	case c.Rights == 0 || c.Rights&^rightsAll != 0:
		return fmt.Errorf("invalid rights %v", c.Rights)
	case !captoken.ValidExpiry(c.Expiry) || c.Expiry.Before(time.Unix(0, 0)):
		return errors.New("expiry missing or out of range")
	case c.Rights&RightWrite != 0 && c.Generation == 0:
		return errors.New("write rights need the write reservation's generation")
	case c.Rights&RightWrite == 0 && c.Generation != 0:
		return errors.New("a read-only token carries no write reservation generation")
	}
	return nil
}

// Key is the HMAC-SHA256 key the control plane signs drive tokens with and
// blocknodes verify them with. It is KeySize bytes long.
type Key []byte

// KeySize is the length of a Key.
const KeySize = captoken.KeySize

// Token limits. Separator joins a drive ID and a token into an NBD export
// name: "hdd3@<token>". The payload is version, rights, epoch, expiry,
// generation, the drive ID's length and the drive ID. Version 1 had no
// generation; its tokens (ten minutes by default, a day at most) are
// refused, and drive connect asks for a new one when it reconnects.
const (
	Separator    = "@"
	tokenVersion = 2
	maxIDLen     = 255
	tokenFixed   = 1 + 1 + 8 + 8 + 8 + 1
	maxPayload   = tokenFixed + maxIDLen
)

// Token errors.
var (
	ErrBadToken = errors.New("invalid drive token")
	ErrExpired  = errors.New("drive token expired")
)

// NewKey returns a random key.
func NewKey() (Key, error) {
	k, err := captoken.NewKey() // crypto/rand does not fail
	return Key(k), err
}

// Sign returns a token carrying c.
func (k Key) Sign(c Claims) (string, error) {
	if err := captoken.Key(k).Check(); err != nil {
		return "", fmt.Errorf("drive token %w", err)
	}
	if err := c.validate(); err != nil {
		return "", err
	}
	p := make([]byte, 0, tokenFixed+len(c.Drive))
	p = append(p, tokenVersion, byte(c.Rights))
	p = binary.BigEndian.AppendUint64(p, c.Epoch)
	p = binary.BigEndian.AppendUint64(p, uint64(c.Expiry.UnixNano()))
	p = binary.BigEndian.AppendUint64(p, c.Generation)
	p = append(p, byte(len(c.Drive)))
	p = append(p, c.Drive...)
	return captoken.Key(k).Seal(p), nil
}

// Verify checks token's MAC in constant time and returns its claims; an
// expired token returns its claims with ErrExpired.
func (k Key) Verify(token string, now time.Time) (Claims, error) {
	var buf [maxPayload]byte
	p, err := captoken.Key(k).Open(buf[:0], token)
	if err != nil {
		return Claims{}, fmt.Errorf("%w: %w", ErrBadToken, err)
	}
	if len(p) < tokenFixed || p[0] != tokenVersion || len(p) != tokenFixed+int(p[tokenFixed-1]) {
		return Claims{}, fmt.Errorf("%w: malformed payload", ErrBadToken)
	}
	c := Claims{
		Rights:     Rights(p[1]),
		Epoch:      binary.BigEndian.Uint64(p[2:]),
		Expiry:     time.Unix(0, int64(binary.BigEndian.Uint64(p[10:]))),
		Generation: binary.BigEndian.Uint64(p[18:]),
		Drive:      string(p[tokenFixed:]),
	}
	if err := c.validate(); err != nil {
		return Claims{}, fmt.Errorf("%w: %w", ErrBadToken, err)
	}
	if captoken.Expired(c.Expiry, now) {
		return c, ErrExpired
	}
	return c, nil
}

// ExportName joins a drive and its token into the NBD export name a
// blocknode serves it under.
func ExportName(drive, token string) string { return drive + Separator + token }

// RedactExportName is how an export name appears in logs: the drive, and
// of the token only that there was one. A token is a bearer credential
// until it expires.
func RedactExportName(name string) string {
	if drive, _, ok := SplitExportName(name); ok {
		return drive + Separator + "REDACTED"
	}
	return name
}

// SplitExportName undoes ExportName.
func SplitExportName(name string) (drive, token string, ok bool) {
	return strings.Cut(name, Separator)
}
