package nbd

import "encoding/binary"

// Magic numbers; doc.go shows where each appears.
const (
	nbdMagic             = 0x4e42444d41474943 // "NBDMAGIC"
	optMagic             = 0x49484156454F5054 // "IHAVEOPT"
	oldstyleMagic        = 0x00420281861253   // cliserv_magic of the oldstyle handshake
	optReplyMagic        = 0x3e889045565a9
	requestMagic         = 0x25609513
	simpleReplyMagic     = 0x67446698
	structuredReplyMagic = 0x668e33ef
)

// Handshake flags (server) and client flags.
const (
	flagFixedNewstyle = 1 << 0
	flagNoZeroes      = 1 << 1

	clientFixedNewstyle = 1 << 0
	clientNoZeroes      = 1 << 1
)

// Transmission flags.
const (
	tflagHasFlags        = 1 << 0
	tflagReadOnly        = 1 << 1
	tflagSendFlush       = 1 << 2
	tflagSendFUA         = 1 << 3
	tflagRotational      = 1 << 4
	tflagSendTrim        = 1 << 5
	tflagSendWriteZeroes = 1 << 6
	tflagSendDF          = 1 << 7
	tflagCanMultiConn    = 1 << 8
	tflagSendResize      = 1 << 9
	tflagSendCache       = 1 << 10
	tflagSendFastZero    = 1 << 11
)

// Options.
const (
	optExportName      = 1
	optAbort           = 2
	optList            = 3
	optPeekExport      = 4
	optStartTLS        = 5
	optInfo            = 6
	optGo              = 7
	optStructuredReply = 8
	optListMetaContext = 9
	optSetMetaContext  = 10
	optExtendedHeaders = 11
)

// Option reply types. Errors have bit 31 set.
const (
	repAck         = 1
	repServer      = 2
	repInfo        = 3
	repMetaContext = 4

	repErrBit           = 1 << 31
	repErrUnsup         = repErrBit + 1
	repErrPolicy        = repErrBit + 2
	repErrInvalid       = repErrBit + 3
	repErrPlatform      = repErrBit + 4
	repErrTLSReqd       = repErrBit + 5
	repErrUnknown       = repErrBit + 6
	repErrShutdown      = repErrBit + 7
	repErrBlockSizeReqd = repErrBit + 8
	repErrTooBig        = repErrBit + 9
)

// Information types of NBD_OPT_INFO and NBD_OPT_GO.
const (
	infoExport      = 0
	infoName        = 1
	infoDescription = 2
	infoBlockSize   = 3
)

// Commands.
const (
	cmdRead        = 0
	cmdWrite       = 1
	cmdDisc        = 2
	cmdFlush       = 3
	cmdTrim        = 4
	cmdCache       = 5
	cmdWriteZeroes = 6
	cmdBlockStatus = 7
)

// Command flags.
const (
	cmdFlagFUA      = 1 << 0
	cmdFlagNoHole   = 1 << 1
	cmdFlagDF       = 1 << 2
	cmdFlagReqOne   = 1 << 3
	cmdFlagFastZero = 1 << 4
)

// Structured reply flags and chunk types.
const (
	replyFlagDone = 1 << 0

	replyTypeNone        = 0
	replyTypeOffsetData  = 1
	replyTypeOffsetHole  = 2
	replyTypeBlockStatus = 5
	replyTypeErrBit      = 1 << 15
	replyTypeError       = replyTypeErrBit + 1
	replyTypeErrorOffset = replyTypeErrBit + 2
)

// base:allocation status flags.
const (
	stateHole = 1 << 0
	stateZero = 1 << 1
)

// metaBaseAllocation is the one metadata context this package knows.
const metaBaseAllocation = "base:allocation"

// Wire error values (NBD_E*).
const (
	errnoPerm     = 1
	errnoIO       = 5
	errnoNoMem    = 12
	errnoInval    = 22
	errnoNoSpc    = 28
	errnoOverflow = 75
	errnoNotSup   = 95
	errnoShutdown = 108
)

// Frame sizes.
const (
	requestLen     = 28 // request header
	simpleReplyLen = 16 // simple reply header
	chunkHdrLen    = 20 // structured reply chunk header
	optHdrLen      = 16 // option request header
	optReplyHdrLen = 20 // option reply header
	zeroPadLen     = 124

	// maxString is the longest string (export name, message, context
	// name) the protocol allows.
	maxString = 4096
	// maxMessage bounds the error messages this package sends; the
	// protocol asks for at most 256 bytes where possible.
	maxMessage = 256
)

// request is a decoded transmission request header.
type request struct {
	flags  uint16
	typ    uint16
	cookie uint64
	off    uint64
	length uint32
}

// decodeRequest decodes b[:requestLen], which must start with
// requestMagic (the caller checks).
func decodeRequest(b []byte) request {
	_ = b[requestLen-1]
	return request{
		flags:  binary.BigEndian.Uint16(b[4:]),
		typ:    binary.BigEndian.Uint16(b[6:]),
		cookie: binary.BigEndian.Uint64(b[8:]),
		off:    binary.BigEndian.Uint64(b[16:]),
		length: binary.BigEndian.Uint32(b[24:]),
	}
}

// putRequest encodes r into b[:requestLen].
func putRequest(b []byte, r request) {
	_ = b[requestLen-1]
	binary.BigEndian.PutUint32(b, requestMagic)
	binary.BigEndian.PutUint16(b[4:], r.flags)
	binary.BigEndian.PutUint16(b[6:], r.typ)
	binary.BigEndian.PutUint64(b[8:], r.cookie)
	binary.BigEndian.PutUint64(b[16:], r.off)
	binary.BigEndian.PutUint32(b[24:], r.length)
}

// putSimpleReply encodes a simple reply header into b[:simpleReplyLen].
func putSimpleReply(b []byte, errno uint32, cookie uint64) {
	_ = b[simpleReplyLen-1]
	binary.BigEndian.PutUint32(b, simpleReplyMagic)
	binary.BigEndian.PutUint32(b[4:], errno)
	binary.BigEndian.PutUint64(b[8:], cookie)
}

// putChunkHeader encodes a structured reply chunk header into
// b[:chunkHdrLen].
func putChunkHeader(b []byte, flags, typ uint16, cookie uint64, length uint32) {
	_ = b[chunkHdrLen-1]
	binary.BigEndian.PutUint32(b, structuredReplyMagic)
	binary.BigEndian.PutUint16(b[4:], flags)
	binary.BigEndian.PutUint16(b[6:], typ)
	binary.BigEndian.PutUint64(b[8:], cookie)
	binary.BigEndian.PutUint32(b[16:], length)
}

// appendOptReply appends an option reply header for a payload of n bytes.
func appendOptReply(b []byte, opt, typ uint32, n int) []byte {
	b = binary.BigEndian.AppendUint64(b, optReplyMagic)
	b = binary.BigEndian.AppendUint32(b, opt)
	b = binary.BigEndian.AppendUint32(b, typ)
	return binary.BigEndian.AppendUint32(b, uint32(n))
}

// appendOption appends an option request with its data.
func appendOption(b []byte, opt uint32, data []byte) []byte {
	b = binary.BigEndian.AppendUint64(b, optMagic)
	b = binary.BigEndian.AppendUint32(b, opt)
	b = binary.BigEndian.AppendUint32(b, uint32(len(data)))
	return append(b, data...)
}

// flagsToWire encodes export flags as transmission flags.
func flagsToWire(f ExportFlags) uint16 {
	w := uint16(tflagHasFlags)
	set := func(ok bool, bit uint16) {
		if ok {
			w |= bit
		}
	}
	set(f.ReadOnly, tflagReadOnly)
	set(f.CanFlush, tflagSendFlush)
	set(f.CanFUA, tflagSendFUA)
	set(f.CanTrim, tflagSendTrim)
	set(f.CanWriteZeroes, tflagSendWriteZeroes)
	set(f.CanWriteZeroes && f.CanFastZero, tflagSendFastZero)
	set(f.CanMultiConn, tflagCanMultiConn)
	return w
}

// flagsFromWire decodes transmission flags; CanBlockStatus is decided by
// the meta context negotiation, not by a flag.
func flagsFromWire(w uint16) ExportFlags {
	return ExportFlags{
		ReadOnly:       w&tflagReadOnly != 0,
		CanFlush:       w&tflagSendFlush != 0,
		CanFUA:         w&tflagSendFUA != 0,
		CanTrim:        w&tflagSendTrim != 0,
		CanWriteZeroes: w&tflagSendWriteZeroes != 0,
		CanFastZero:    w&tflagSendWriteZeroes != 0 && w&tflagSendFastZero != 0,
		CanMultiConn:   w&tflagCanMultiConn != 0,
	}
}

// cmdNames names commands for logs and errors.
var cmdNames = [...]string{
	cmdRead:        "read",
	cmdWrite:       "write",
	cmdDisc:        "disc",
	cmdFlush:       "flush",
	cmdTrim:        "trim",
	cmdCache:       "cache",
	cmdWriteZeroes: "write_zeroes",
	cmdBlockStatus: "block_status",
}

func cmdName(t uint16) string {
	if int(t) < len(cmdNames) {
		return cmdNames[t]
	}
	return "unknown"
}
