//go:build linux && (amd64 || arm64 || riscv64 || loong64)

package pager

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"rackpool/internal/memory"
)

// The control channel between a Pager and its helper is a SOCK_SEQPACKET
// socket pair; each message is one packet whose first byte is its kind.
//
//	parent → helper  'C' JSON config   (first, once)
//	                 'S' seq           stats request (seq: uint64, big-endian)
//	                 'Q'               quit: exit now
//	helper → parent  'R'               ready: the lease is reachable and large enough
//	                 'E' code text     failed (sticky); code names a memory sentinel
//	                 'S' seq Stats     stats reply to request seq (binary, big-endian)
const (
	msgConfig = 'C'
	msgStats  = 'S'
	msgQuit   = 'Q'
	msgReady  = 'R'
	msgError  = 'E'
)

// helperConfig is what the parent tells its helper.
type helperConfig struct {
	Base      uint64 // the region's address in the parent
	Size      int64
	Local     int64
	Endpoint  string
	Token     string
	Offset    uint64
	Prefetch  int
	IOTimeout time.Duration
	// MapSocket: serve from the lease mapped through this socket.
	MapSocket string
	// Writable: install fetched pages writable too (zeros always are) and
	// take them as possibly dirty, so that no write-protect fault occurs;
	// eviction then writes back only the pages whose contents changed.
	// Set with MapSocket, where telling a changed page from the pool's
	// copy costs a compare, not a round trip.
	Writable bool
}

// wireErrors are the sentinels an error message can name, by code (the
// index); code 0 names none.
var wireErrors = []error{nil,
	memory.ErrBadToken, memory.ErrExpired, memory.ErrRevoked, memory.ErrWrongNode,
	memory.ErrNoAuth, memory.ErrRights, memory.ErrRange, memory.ErrNoSpace,
	memory.ErrTooLarge, memory.ErrClosed, memory.ErrProtocol, memory.ErrNodeRestarted,
	errLeaseTooSmall,
}

// errLeaseTooSmall means the token's lease is smaller than the region.
var errLeaseTooSmall = errors.New("pager: lease smaller than the region")

func encodeError(err error) []byte {
	code := 0
	for i, e := range wireErrors {
		if e != nil && errors.Is(err, e) {
			code = i
			break
		}
	}
	msg := err.Error()
	if len(msg) > 1000 {
		msg = msg[:1000]
	}
	return append([]byte{msgError, byte(code)}, msg...)
}

// decodeError returns the helper's error: its text, wrapping the sentinel
// its code names.
func decodeError(p []byte) error {
	if len(p) < 2 {
		return &helperError{text: "the helper sent a malformed error"}
	}
	e := &helperError{text: string(p[2:])}
	if c := int(p[1]); c > 0 && c < len(wireErrors) {
		e.sentinel = wireErrors[c]
	}
	return e
}

// helperError is an error the helper reported.
type helperError struct {
	text     string
	sentinel error
}

func (e *helperError) Error() string { return e.text }
func (e *helperError) Unwrap() error { return e.sentinel }

// A stats request and its reply carry the request's sequence number, so
// that a reply that comes late, after its request gave up waiting, is not
// taken for the answer to a later request.
func encodeStatsRequest(seq uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{msgStats}, seq)
}

func decodeStatsRequest(p []byte) (seq uint64, ok bool) {
	if len(p) != 9 || p[0] != msgStats {
		return 0, false
	}
	return binary.BigEndian.Uint64(p[1:]), true
}

func encodeStats(seq uint64, s Stats) []byte {
	var b bytes.Buffer
	b.WriteByte(msgStats)
	binary.Write(&b, binary.BigEndian, seq)
	binary.Write(&b, binary.BigEndian, &s)
	return b.Bytes()
}

func decodeStats(p []byte) (seq uint64, s Stats, err error) {
	if len(p) < 9 || binary.Size(&s) != len(p)-9 {
		return 0, s, fmt.Errorf("pager: stats reply of %d bytes", len(p))
	}
	err = binary.Read(bytes.NewReader(p[9:]), binary.BigEndian, &s)
	return binary.BigEndian.Uint64(p[1:]), s, err
}
