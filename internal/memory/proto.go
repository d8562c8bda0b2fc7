package memory

import (
	"encoding/binary"
	"fmt"
)

// Frame constants; doc.go describes the layouts.
const (
	protoVersion = 0xA1

	reqHdrLen  = 24
	respHdrLen = 12

	authRespLen   = 16
	statRespLen   = 32
	appendRespLen = 8
	mapRespLen    = 24

	// maxErrMsg bounds the message carried by an error response.
	maxErrMsg = 256

	// DefaultMaxFrame is the frame limit used when ServerOptions.MaxFrame
	// is 0.
	DefaultMaxFrame = 8 << 20
	// minMaxFrame is the smallest frame limit a server accepts: it must
	// take any token.
	minMaxFrame = 4096
)

// Opcodes.
const (
	opAuth   = 1
	opRead   = 2
	opWrite  = 3
	opAppend = 4
	opStat   = 5
	opZero   = 6
	opPing   = 7
	opMap    = 8
	opMax    = opMap
)

var opNames = [...]string{
	opAuth:   "auth",
	opRead:   "read",
	opWrite:  "write",
	opAppend: "append",
	opStat:   "stat",
	opZero:   "zero",
	opPing:   "ping",
	opMap:    "map",
}

func opName(op byte) string {
	if op == 0 || int(op) >= len(opNames) {
		return fmt.Sprintf("op%d", op)
	}
	return opNames[op]
}

// Response status codes.
const (
	statusOK = iota
	statusBadToken
	statusExpired
	statusRevoked
	statusWrongNode
	statusNoAuth
	statusRights
	statusRange
	statusNoSpace
	statusTooLarge
	statusProtocol
)

// statusErrs maps a status to its sentinel; index 0 is unused.
var statusErrs = [...]error{
	statusBadToken:  ErrBadToken,
	statusExpired:   ErrExpired,
	statusRevoked:   ErrRevoked,
	statusWrongNode: ErrWrongNode,
	statusNoAuth:    ErrNoAuth,
	statusRights:    ErrRights,
	statusRange:     ErrRange,
	statusNoSpace:   ErrNoSpace,
	statusTooLarge:  ErrTooLarge,
	statusProtocol:  ErrProtocol,
}

// statusErr returns the sentinel for a non-OK status.
func statusErr(st byte) error {
	if st == statusOK || int(st) >= len(statusErrs) {
		return fmt.Errorf("%w: unknown status %d", ErrProtocol, st)
	}
	return statusErrs[st]
}

// reqHeader is a decoded request header.
type reqHeader struct {
	version byte
	op      byte
	flags   uint16
	tag     uint32
	offset  uint64
	count   uint32
	length  uint32
}

func (h *reqHeader) decode(b []byte) {
	_ = b[reqHdrLen-1]
	h.version = b[0]
	h.op = b[1]
	h.flags = binary.BigEndian.Uint16(b[2:])
	h.tag = binary.BigEndian.Uint32(b[4:])
	h.offset = binary.BigEndian.Uint64(b[8:])
	h.count = binary.BigEndian.Uint32(b[16:])
	h.length = binary.BigEndian.Uint32(b[20:])
}

func (h *reqHeader) encode(b []byte) {
	_ = b[reqHdrLen-1]
	b[0] = h.version
	b[1] = h.op
	binary.BigEndian.PutUint16(b[2:], h.flags)
	binary.BigEndian.PutUint32(b[4:], h.tag)
	binary.BigEndian.PutUint64(b[8:], h.offset)
	binary.BigEndian.PutUint32(b[16:], h.count)
	binary.BigEndian.PutUint32(b[20:], h.length)
}

// appendRespHeader appends a response header to b.
func appendRespHeader(b []byte, tag uint32, status byte, length uint32) []byte {
	b = binary.BigEndian.AppendUint32(b, tag)
	b = append(b, status, 0, 0, 0)
	return binary.BigEndian.AppendUint32(b, length)
}
