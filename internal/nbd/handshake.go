package nbd

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"time"
	"unicode/utf8"
)

// Option phase bounds.
const (
	// maxOptionLen is the longest option data the server reads; longer
	// options are answered NBD_REP_ERR_TOO_BIG.
	maxOptionLen = 64 << 10
	// maxOptionSkip is the longest oversized option data the server
	// skips to go on negotiating; beyond it the client is dropped.
	maxOptionSkip = 1 << 20
	// maxListReplies bounds the NBD_REP_SERVER replies to one NBD_OPT_LIST.
	maxListReplies = 1 << 16
	// metaContextID is the ID of base:allocation on a connection.
	metaContextID = 1
)

var (
	errAbort      = errors.New("nbd: client aborted negotiation")
	errBadFlags   = errors.New("nbd: client flags refused")
	errBadOptHdr  = errors.New("nbd: bad option magic")
	errTooBig     = errors.New("nbd: option too large to skip")
	errExportName = errors.New("nbd: export refused for NBD_OPT_EXPORT_NAME")
)

// negotiated is the outcome of a successful negotiation.
type negotiated struct {
	name        string
	export      Export
	structured  bool
	blockStatus bool // base:allocation selected for this export
}

// handshake is the server side of one connection's option phase.
type handshake struct {
	exports Exports
	st      settings
	log     *slog.Logger
	nc      net.Conn
	br      *reader

	out        []byte // replies not yet written
	data       []byte // the current option's data
	noZeroes   bool
	secured    bool // TLS was negotiated: nc is a *tlsConn
	structured bool
	metaExport string // export named by the last NBD_OPT_SET_META_CONTEXT
	metaAlloc  bool   // whether that option selected base:allocation
}

// run negotiates until the client enters transmission (GO or
// EXPORT_NAME), aborts, breaks the protocol or runs out of time.
func (h *handshake) run(ctx context.Context) (negotiated, error) {
	deadline := time.Now().Add(h.st.handshakeTimeout)
	h.nc.SetDeadline(deadline)
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()

	h.out = binary.BigEndian.AppendUint64(h.out[:0], nbdMagic)
	h.out = binary.BigEndian.AppendUint64(h.out, optMagic)
	h.out = binary.BigEndian.AppendUint16(h.out, flagFixedNewstyle|flagNoZeroes)
	if err := h.flush(); err != nil {
		return negotiated{}, err
	}
	var cf [4]byte
	if _, err := io.ReadFull(h.br, cf[:]); err != nil {
		return negotiated{}, fmt.Errorf("read client flags: %w", err)
	}
	flags := binary.BigEndian.Uint32(cf[:])
	if flags&^(clientFixedNewstyle|clientNoZeroes) != 0 || flags&clientFixedNewstyle == 0 {
		// Unknown flags must drop the connection; a client without
		// fixed newstyle is refused as well (see doc.go).
		return negotiated{}, fmt.Errorf("%w: %#x", errBadFlags, flags)
	}
	h.noZeroes = flags&clientNoZeroes != 0

	for {
		var hdr [optHdrLen]byte
		if _, err := io.ReadFull(h.br, hdr[:]); err != nil {
			return negotiated{}, fmt.Errorf("read option: %w", err)
		}
		if binary.BigEndian.Uint64(hdr[:]) != optMagic {
			return negotiated{}, errBadOptHdr
		}
		opt := binary.BigEndian.Uint32(hdr[8:])
		n := binary.BigEndian.Uint32(hdr[12:])
		if n > maxOptionLen {
			if err := h.tooBig(opt, n); err != nil {
				return negotiated{}, err
			}
			continue
		}
		h.data = growTo(h.data, int(n))
		if _, err := io.ReadFull(h.br, h.data); err != nil {
			return negotiated{}, fmt.Errorf("read option data: %w", err)
		}
		if h.tlsRequired(opt) {
			err := h.refuseBeforeTLS(opt)
			if err == nil {
				err = h.flush()
			}
			if err != nil {
				return negotiated{}, err
			}
			continue
		}
		neg, done, err := h.option(ctx, opt, h.data)
		if err == nil {
			err = h.flush()
		}
		if err != nil {
			if neg.export != nil {
				neg.export.Close()
			}
			return negotiated{}, err
		}
		if done {
			h.nc.SetDeadline(time.Time{})
			return neg, nil
		}
	}
}

// tooBig answers an option whose data exceeds maxOptionLen and skips the
// data, or drops the client when there is too much to skip.
func (h *handshake) tooBig(opt, n uint32) error {
	if opt == optExportName {
		// NBD_OPT_EXPORT_NAME has no error reply: end the session.
		return fmt.Errorf("%w: export name of %d bytes", errTooBig, n)
	}
	if h.tlsRequired(opt) {
		if err := h.refuseBeforeTLS(opt); err != nil {
			return err
		}
	} else {
		h.reply(opt, repErrTooBig, fmt.Sprintf("option data of %d bytes exceeds %d", n, maxOptionLen))
	}
	if err := h.flush(); err != nil {
		return err
	}
	if n > maxOptionSkip {
		return fmt.Errorf("%w: %d bytes", errTooBig, n)
	}
	if _, err := h.br.Discard(int(n)); err != nil {
		return fmt.Errorf("skip option data: %w", err)
	}
	return nil
}

// option handles one option. done means transmission starts with neg.
func (h *handshake) option(ctx context.Context, opt uint32, d []byte) (neg negotiated, done bool, err error) {
	switch opt {
	case optExportName:
		return h.exportName(ctx, d)
	case optAbort:
		h.reply(opt, repAck, "")
		h.flush()
		return negotiated{}, false, errAbort
	case optList:
		h.list(ctx, d)
	case optStartTLS:
		return negotiated{}, false, h.startTLS(ctx, d)
	case optInfo, optGo:
		return h.infoGo(ctx, opt, d)
	case optStructuredReply:
		if len(d) != 0 {
			h.reply(opt, repErrInvalid, "NBD_OPT_STRUCTURED_REPLY takes no data")
			break
		}
		h.structured = true
		h.reply(opt, repAck, "")
	case optListMetaContext, optSetMetaContext:
		h.metaContext(opt, d)
	default:
		h.reply(opt, repErrUnsup, fmt.Sprintf("option %d is not supported", opt))
	}
	return negotiated{}, false, nil
}

// exportName handles NBD_OPT_EXPORT_NAME, which has no error reply: a
// refusal drops the connection.
func (h *handshake) exportName(ctx context.Context, d []byte) (negotiated, bool, error) {
	name := string(d)
	if !validString(name) {
		return negotiated{}, false, fmt.Errorf("%w: malformed name", errExportName)
	}
	ex, err := h.exports.Open(ctx, name)
	if err != nil {
		return negotiated{}, false, fmt.Errorf("%w: %q: %w", errExportName, h.st.logName(name), err)
	}
	neg := h.negotiated(name, ex)
	h.out = binary.BigEndian.AppendUint64(h.out, ex.Size())
	h.out = binary.BigEndian.AppendUint16(h.out, h.transmissionFlags(ex))
	if !h.noZeroes {
		h.out = append(h.out, make([]byte, zeroPadLen)...)
	}
	return neg, true, nil
}

// infoGo handles NBD_OPT_INFO and NBD_OPT_GO.
func (h *handshake) infoGo(ctx context.Context, opt uint32, d []byte) (negotiated, bool, error) {
	name, reqs, ok := parseInfoGo(d)
	if !ok {
		h.reply(opt, repErrInvalid, "malformed NBD_OPT_INFO or NBD_OPT_GO data")
		return negotiated{}, false, nil
	}
	ex, err := h.exports.Open(ctx, name)
	if err != nil {
		h.openFailed(opt, name, err)
		return negotiated{}, false, nil
	}
	var wantName, wantDesc bool
	for i := 0; i+1 < len(reqs); i += 2 {
		switch binary.BigEndian.Uint16(reqs[i:]) {
		case infoName:
			wantName = true
		case infoDescription:
			wantDesc = true
		}
	}

	var b [14]byte
	binary.BigEndian.PutUint16(b[0:], infoExport)
	binary.BigEndian.PutUint64(b[2:], ex.Size())
	binary.BigEndian.PutUint16(b[10:], h.transmissionFlags(ex))
	h.replyData(opt, repInfo, b[:12])
	// Block sizes go out whether asked or not: clients ignore what they
	// did not ask for, and the maximum is not the default.
	binary.BigEndian.PutUint16(b[0:], infoBlockSize)
	binary.BigEndian.PutUint32(b[2:], 1)
	binary.BigEndian.PutUint32(b[6:], preferredBlock)
	binary.BigEndian.PutUint32(b[10:], h.st.maxPayload)
	h.replyData(opt, repInfo, b[:14])
	if wantName {
		h.replyInfoString(opt, infoName, name)
	}
	if d, ok := ex.(interface{ Description() string }); ok && wantDesc {
		if desc := truncateUTF8(d.Description(), maxString); desc != "" {
			h.replyInfoString(opt, infoDescription, desc)
		}
	}
	h.reply(opt, repAck, "")
	if opt == optInfo {
		if err := ex.Close(); err != nil {
			h.log.Warn("nbd export close failed", "export", h.st.logName(name), "err", err)
		}
		return negotiated{}, false, nil
	}
	return h.negotiated(name, ex), true, nil
}

// openFailed answers an INFO or GO whose Open failed.
func (h *handshake) openFailed(opt uint32, name string, err error) {
	switch {
	case errors.Is(err, ErrUnknownExport):
		h.reply(opt, repErrUnknown, peerMessage(err, ""))
	case errors.Is(err, ErrPolicy):
		h.reply(opt, repErrPolicy, peerMessage(err, ""))
	default:
		h.log.Warn("nbd export open failed", "export", h.st.logName(name), "err", err)
		h.reply(opt, repErrUnknown, "export not available")
	}
}

// list handles NBD_OPT_LIST.
func (h *handshake) list(ctx context.Context, d []byte) {
	if len(d) != 0 {
		h.reply(optList, repErrInvalid, "NBD_OPT_LIST takes no data")
		return
	}
	infos, err := h.exports.List(ctx)
	switch {
	case errors.Is(err, ErrPolicy):
		h.reply(optList, repErrPolicy, peerMessage(err, ""))
		return
	case errors.Is(err, ErrNotSupported):
		h.reply(optList, repErrUnsup, peerMessage(err, ""))
		return
	case err != nil:
		h.log.Warn("nbd export list failed", "err", err)
		h.reply(optList, repErrPolicy, "export list not available")
		return
	}
	for i, in := range infos {
		if i == maxListReplies {
			break
		}
		if !validString(in.Name) {
			h.log.Warn("nbd export name not sendable; left out of the list", "export", h.st.logName(in.Name))
			continue
		}
		desc := truncateUTF8(strings.ToValidUTF8(strings.ReplaceAll(in.Description, "\x00", ""), ""), maxString)
		h.out = appendOptReply(h.out, optList, repServer, 4+len(in.Name)+len(desc))
		h.out = binary.BigEndian.AppendUint32(h.out, uint32(len(in.Name)))
		h.out = append(h.out, in.Name...)
		h.out = append(h.out, desc...)
		if len(h.out) >= readBufSize {
			if err := h.flush(); err != nil {
				return // the next read fails as well
			}
		}
	}
	h.reply(optList, repAck, "")
}

// metaContext handles NBD_OPT_LIST_META_CONTEXT and
// NBD_OPT_SET_META_CONTEXT. base:allocation is the only context: "base:"
// lists it, "base:allocation" lists and selects it, other queries match
// nothing.
func (h *handshake) metaContext(opt uint32, d []byte) {
	set := opt == optSetMetaContext
	if set {
		// A SET replaces the selection even when it fails.
		h.metaExport, h.metaAlloc = "", false
	}
	if !h.structured {
		h.reply(opt, repErrInvalid, "negotiate structured replies first")
		return
	}
	name, queries, ok := parseMetaContext(d)
	if !ok {
		h.reply(opt, repErrInvalid, "malformed meta context request")
		return
	}
	match := !set && len(queries) == 0
	for _, q := range queries {
		if q == metaBaseAllocation || (!set && q == "base:") {
			match = true
		}
	}
	if match {
		var id uint32
		if set {
			id = metaContextID
			h.metaExport, h.metaAlloc = name, true
		}
		h.out = appendOptReply(h.out, opt, repMetaContext, 4+len(metaBaseAllocation))
		h.out = binary.BigEndian.AppendUint32(h.out, id)
		h.out = append(h.out, metaBaseAllocation...)
	}
	h.reply(opt, repAck, "")
}

// negotiated is the outcome of entering transmission with ex.
func (h *handshake) negotiated(name string, ex Export) negotiated {
	return negotiated{
		name:        name,
		export:      ex,
		structured:  h.structured,
		blockStatus: h.structured && h.metaAlloc && h.metaExport == name,
	}
}

// transmissionFlags are the flags advertised for ex on this connection.
func (h *handshake) transmissionFlags(ex Export) uint16 {
	f := flagsToWire(ex.Flags())
	if h.structured {
		// Reads are always answered with one chunk, so "don't
		// fragment" costs nothing.
		f |= tflagSendDF
	}
	return f
}

// reply queues an option reply whose data is msg (an error's message).
func (h *handshake) reply(opt, typ uint32, msg string) {
	h.out = appendOptReply(h.out, opt, typ, len(msg))
	h.out = append(h.out, msg...)
}

func (h *handshake) replyData(opt, typ uint32, d []byte) {
	h.out = appendOptReply(h.out, opt, typ, len(d))
	h.out = append(h.out, d...)
}

func (h *handshake) replyInfoString(opt uint32, info uint16, s string) {
	h.out = appendOptReply(h.out, opt, repInfo, 2+len(s))
	h.out = binary.BigEndian.AppendUint16(h.out, info)
	h.out = append(h.out, s...)
}

func (h *handshake) flush() error {
	if len(h.out) == 0 {
		return nil
	}
	_, err := h.nc.Write(h.out)
	h.out = h.out[:0]
	return err
}

// parseInfoGo splits NBD_OPT_INFO/GO data into the export name and the
// information requests (2 bytes each).
func parseInfoGo(d []byte) (name string, reqs []byte, ok bool) {
	if len(d) < 6 {
		return "", nil, false
	}
	nl := binary.BigEndian.Uint32(d)
	if uint64(nl) > uint64(len(d)-6) {
		return "", nil, false
	}
	name = string(d[4 : 4+nl])
	rest := d[4+nl:]
	n := int(binary.BigEndian.Uint16(rest))
	if len(rest) != 2+2*n || !validString(name) {
		return "", nil, false
	}
	return name, rest[2:], true
}

// parseMetaContext splits NBD_OPT_LIST/SET_META_CONTEXT data into the
// export name and the queries.
func parseMetaContext(d []byte) (name string, queries []string, ok bool) {
	if len(d) < 8 {
		return "", nil, false
	}
	nl := binary.BigEndian.Uint32(d)
	if uint64(nl) > uint64(len(d)-8) {
		return "", nil, false
	}
	name = string(d[4 : 4+nl])
	rest := d[4+nl:]
	nq := binary.BigEndian.Uint32(rest)
	rest = rest[4:]
	if uint64(nq) > uint64(len(rest)/4) {
		return "", nil, false
	}
	queries = make([]string, 0, nq)
	for range nq {
		if len(rest) < 4 {
			return "", nil, false
		}
		ql := binary.BigEndian.Uint32(rest)
		if uint64(ql) > uint64(len(rest)-4) {
			return "", nil, false
		}
		q := string(rest[4 : 4+ql])
		if !validString(q) {
			return "", nil, false
		}
		queries = append(queries, q)
		rest = rest[4+ql:]
	}
	if len(rest) != 0 || !validString(name) {
		return "", nil, false
	}
	return name, queries, true
}

// validString reports whether s is a protocol string: UTF-8, no NUL, at
// most maxString bytes.
func validString(s string) bool {
	return len(s) <= maxString && utf8.ValidString(s) && strings.IndexByte(s, 0) < 0
}

// growTo returns b resized to n bytes, reallocating only if it is too
// small.
func growTo(b []byte, n int) []byte {
	if cap(b) < n {
		return make([]byte, n)
	}
	return b[:n]
}
