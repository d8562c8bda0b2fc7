package cache

import (
	"encoding/binary"
	"io"
)

// memcached's binary protocol (deprecated upstream but still spoken by
// many clients and by memccapable). A request or response is a 24-byte
// header, then extras, key and value:
//
//	byte  0    magic (0x80 request, 0x81 response)
//	      1    opcode
//	      2-3  key length
//	      4    extras length
//	      5    data type (0)
//	      6-7  vbucket (request) / status (response)
//	      8-11 total body length
//	     12-15 opaque (echoed)
//	     16-23 CAS
//
// A connection's command is binary when it starts with 0x80.

const (
	binReqMagic = 0x80
	binResMagic = 0x81
	binHdrLen   = 24
)

// Binary opcodes.
const (
	opGet       = 0x00
	opSet       = 0x01
	opAdd       = 0x02
	opReplace   = 0x03
	opDelete    = 0x04
	opIncrement = 0x05
	opDecrement = 0x06
	opQuit      = 0x07
	opFlush     = 0x08
	opGetQ      = 0x09
	opNoop      = 0x0a
	opVersion   = 0x0b
	opGetK      = 0x0c
	opGetKQ     = 0x0d
	opAppend    = 0x0e
	opPrepend   = 0x0f
	opStat      = 0x10
	opSetQ      = 0x11
	opAddQ      = 0x12
	opReplaceQ  = 0x13
	opDeleteQ   = 0x14
	opIncrQ     = 0x15
	opDecrQ     = 0x16
	opQuitQ     = 0x17
	opFlushQ    = 0x18
	opAppendQ   = 0x19
	opPrependQ  = 0x1a
	opVerbosity = 0x1b
	opTouch     = 0x1c
	opGAT       = 0x1d
	opGATQ      = 0x1e
	opGATK      = 0x23
	opGATKQ     = 0x24
)

// Binary response statuses and memcached's messages for them.
const (
	stOK         = 0x00
	stNotFound   = 0x01
	stExists     = 0x02
	stTooLarge   = 0x03
	stInvalid    = 0x04
	stNotStored  = 0x05
	stNonNumeric = 0x06
	stUnknown    = 0x81
	stNoMemory   = 0x82
)

var binMessages = map[uint16]string{
	stNotFound:   "Not found",
	stExists:     "Data exists for key.",
	stTooLarge:   "Too large.",
	stInvalid:    "Invalid arguments",
	stNotStored:  "Not stored.",
	stNonNumeric: "Non-numeric server-side value for incr or decr",
	stUnknown:    "Unknown command",
	stNoMemory:   "Out of memory",
}

// binReq is a decoded request header.
type binReq struct {
	op     byte
	klen   int
	elen   int
	body   int
	opaque uint32
	cas    uint64
	quiet  bool
}

// binQuiet maps quiet opcodes to their loud counterparts.
var binQuiet = map[byte]byte{
	opGetQ: opGet, opGetKQ: opGetK, opSetQ: opSet, opAddQ: opAdd, opReplaceQ: opReplace,
	opDeleteQ: opDelete, opIncrQ: opIncrement, opDecrQ: opDecrement, opQuitQ: opQuit,
	opFlushQ: opFlush, opAppendQ: opAppend, opPrependQ: opPrepend, opGATQ: opGAT, opGATKQ: opGATK,
}

// binaryCommand handles one binary request. A returned error closes the
// connection.
func (cn *conn) binaryCommand() error {
	var h [binHdrLen]byte
	if err := cn.waitCommand(binHdrLen); err != nil {
		return err
	}
	if _, err := io.ReadFull(cn.r, h[:]); err != nil {
		return err
	}
	cn.now = cn.c.now()
	rq := binReq{
		op:     h[1],
		klen:   int(binary.BigEndian.Uint16(h[2:])),
		elen:   int(h[4]),
		body:   int(binary.BigEndian.Uint32(h[8:])),
		opaque: binary.BigEndian.Uint32(h[12:]),
		cas:    binary.BigEndian.Uint64(h[16:]),
	}
	op := rq.op // the opcode echoed in the reply
	if loud, ok := binQuiet[rq.op]; ok {
		rq.op, rq.quiet = loud, true
	}
	if rq.body < rq.klen+rq.elen {
		cn.binError(op, &rq, stInvalid)
		return errLineTooLong
	}
	vlen := rq.body - rq.klen - rq.elen
	if rq.klen > maxKeyLen {
		cn.binError(op, &rq, stInvalid)
		return cn.swallow(rq.body)
	}
	// Extras and key are small; read them into the line scratch.
	var ek [255 + maxKeyLen]byte
	if _, err := io.ReadFull(cn.r, ek[:rq.elen+rq.klen]); err != nil {
		return err
	}
	extras := ek[:rq.elen]
	key := ek[rq.elen : rq.elen+rq.klen]

	switch rq.op {
	case opSet, opAdd, opReplace, opAppend, opPrepend:
		return cn.binStore(op, &rq, extras, key, vlen)
	}
	// No other command takes a value.
	if vlen > 0 {
		cn.binError(op, &rq, stInvalid)
		return cn.swallow(vlen)
	}
	c := cn.c
	switch rq.op {
	case opGet, opGetK, opGAT, opGATK:
		touch := rq.op == opGAT || rq.op == opGATK
		if (touch && rq.elen != 4) || (!touch && rq.elen != 0) || rq.klen == 0 {
			cn.binError(op, &rq, stInvalid)
			return nil
		}
		var exp int64
		if touch {
			exp = realtime(int64(int32(binary.BigEndian.Uint32(extras))), cn.now)
		}
		hit, ok := c.get(key, cn.now, touch, exp)
		c.detail.record(key, prefixGet, ok)
		if !ok {
			if !rq.quiet {
				if rq.op == opGetK || rq.op == opGATK {
					cn.binReply(op, &rq, stNotFound, 0, nil, key, []byte(binMessages[stNotFound]), nil)
				} else {
					cn.binError(op, &rq, stNotFound)
				}
			}
			return nil
		}
		var fl [4]byte
		binary.BigEndian.PutUint32(fl[:], hit.flags)
		var k []byte
		if rq.op == opGetK || rq.op == opGATK {
			k = key
		}
		cn.binReply(op, &rq, stOK, hit.cas, fl[:], k, hit.value, hit.pb)
	case opTouch:
		if rq.elen != 4 || rq.klen == 0 {
			cn.binError(op, &rq, stInvalid)
			return nil
		}
		exp := realtime(int64(int32(binary.BigEndian.Uint32(extras))), cn.now)
		if c.touch(key, cn.now, exp) {
			cn.binOK(op, &rq, 0)
		} else {
			cn.binError(op, &rq, stNotFound)
		}
	case opDelete:
		if rq.elen != 0 || rq.klen == 0 {
			cn.binError(op, &rq, stInvalid)
			return nil
		}
		c.detail.record(key, prefixDel, false)
		switch c.deleteCAS(key, cn.now, rq.cas) {
		case resStored:
			cn.binOK(op, &rq, 0)
		case resExists:
			cn.binError(op, &rq, stExists)
		default:
			cn.binError(op, &rq, stNotFound)
		}
	case opIncrement, opDecrement:
		if rq.elen != 20 || rq.klen == 0 {
			cn.binError(op, &rq, stInvalid)
			return nil
		}
		req := deltaReq{
			key:     key,
			incr:    rq.op == opIncrement,
			delta:   binary.BigEndian.Uint64(extras[0:]),
			initial: binary.BigEndian.Uint64(extras[8:]),
			cas:     rq.cas,
		}
		if e := binary.BigEndian.Uint32(extras[16:]); e != 0xffffffff {
			req.vivify = true
			req.vivExp = realtime(int64(int32(e)), cn.now)
		}
		res, out := c.arith(&req, cn.now, func(e *item, created bool) {
			if created {
				c.shardForString(e.key).setExp(e, req.vivExp) // apply runs under that shard's lock
			}
		})
		switch res {
		case deltaOK:
			var v [8]byte
			binary.BigEndian.PutUint64(v[:], out.value)
			if !rq.quiet {
				cn.binReply(op, &rq, stOK, out.cas, nil, nil, v[:], nil)
			}
		case deltaNotFound:
			cn.binError(op, &rq, stNotFound)
		case deltaCASMismatch:
			cn.binError(op, &rq, stExists)
		case deltaNonNumeric:
			cn.binError(op, &rq, stNonNumeric)
		default:
			cn.binError(op, &rq, stNoMemory)
		}
	case opQuit:
		if !rq.quiet {
			cn.binOK(op, &rq, 0)
		}
		return errQuit
	case opFlush:
		if rq.elen != 0 && rq.elen != 4 {
			cn.binError(op, &rq, stInvalid)
			return nil
		}
		var delay int64
		if rq.elen == 4 {
			delay = int64(int32(binary.BigEndian.Uint32(extras)))
		}
		if delay > 0 {
			c.flush(realtime(delay, cn.now))
		} else {
			c.flush(0)
		}
		cn.binOK(op, &rq, 0)
	case opNoop:
		cn.binOK(op, &rq, 0)
		return cn.flush()
	case opVersion:
		cn.binReply(op, &rq, stOK, 0, nil, nil, []byte(Version), nil)
	case opVerbosity:
		cn.binOK(op, &rq, 0)
	case opStat:
		switch string(key) {
		case "":
			for _, kv := range c.generalStats() {
				cn.binReply(op, &rq, stOK, 0, nil, []byte(kv[0]), []byte(kv[1]), nil)
			}
		case "reset":
			c.resetStats()
		case "settings":
			for _, kv := range c.settingsStats() {
				cn.binReply(op, &rq, stOK, 0, nil, []byte(kv[0]), []byte(kv[1]), nil)
			}
		case "items", "slabs", "sizes", "conns":
			for _, kv := range c.groupStats(string(key), cn) {
				cn.binReply(op, &rq, stOK, 0, nil, []byte(kv[0]), []byte(kv[1]), nil)
			}
		case "detail on", "detail off":
			c.detail.on.Store(string(key) == "detail on")
		case "detail dump":
			cn.binReply(op, &rq, stOK, 0, nil, []byte("detailed"), []byte(c.detail.dump()), nil)
		default:
			cn.binError(op, &rq, stNotFound)
			return nil
		}
		cn.binReply(op, &rq, stOK, 0, nil, nil, nil, nil)
	default:
		cn.binError(op, &rq, stUnknown)
	}
	return nil
}

// binStore handles set/add/replace/append/prepend and their quiet forms.
func (cn *conn) binStore(op byte, rq *binReq, extras, key []byte, vlen int) error {
	c := cn.c
	var flags uint32
	var exp int64
	switch rq.op {
	case opSet, opAdd, opReplace:
		if rq.elen != 8 || rq.klen == 0 {
			cn.binError(op, rq, stInvalid)
			return cn.swallow(vlen)
		}
		flags = binary.BigEndian.Uint32(extras[0:])
		exp = realtime(int64(int32(binary.BigEndian.Uint32(extras[4:]))), cn.now)
	default:
		if rq.elen != 0 || rq.klen == 0 {
			cn.binError(op, rq, stInvalid)
			return cn.swallow(vlen)
		}
	}
	c.detail.record(key, prefixSet, false)
	if c.itemTooLarge(len(key), flags, vlen) {
		c.st.storeTooLarge.Add(1)
		cn.binError(op, rq, stTooLarge)
		if rq.op == opSet {
			c.delete(key, cn.now)
		}
		return cn.swallow(vlen)
	}
	if !c.fits(itemSize(len(key), vlen)) {
		cn.binError(op, rq, stNoMemory)
		return cn.swallow(vlen)
	}
	v := make([]byte, vlen)
	if _, err := io.ReadFull(cn.r, v); err != nil {
		return err
	}
	mode := map[byte]storeMode{opSet: modeSet, opAdd: modeAdd, opReplace: modeReplace, opAppend: modeAppend, opPrepend: modePrepend}[rq.op]
	if rq.cas != 0 && (mode == modeSet || mode == modeAdd || mode == modeReplace) {
		mode = modeCAS
	}
	req := storeReq{key: key, value: v, flags: flags, exp: exp, mode: mode, cas: rq.cas}
	res, cas := c.store(&req, cn.now)
	switch res {
	case resStored:
		if !rq.quiet {
			cn.binOK(op, rq, cas)
		}
	case resExists:
		cn.binError(op, rq, stExists)
	case resNotFound:
		cn.binError(op, rq, stNotFound)
	case resNoMemory:
		cn.binError(op, rq, stNoMemory)
	default:
		switch rq.op {
		case opAdd:
			cn.binError(op, rq, stExists)
		case opReplace:
			cn.binError(op, rq, stNotFound)
		default:
			cn.binError(op, rq, stNotStored)
		}
	}
	return nil
}

// binOK answers success with no body (suppressed for quiet commands).
func (cn *conn) binOK(op byte, rq *binReq, cas uint64) {
	if rq.quiet {
		return
	}
	cn.binReply(op, rq, stOK, cas, nil, nil, nil, nil)
}

// binError answers an error with memcached's message as the body.
func (cn *conn) binError(op byte, rq *binReq, status uint16) {
	cn.binReply(op, rq, status, 0, nil, nil, []byte(binMessages[status]), nil)
}

// binReply writes one response; a large value is queued by reference.
func (cn *conn) binReply(op byte, rq *binReq, status uint16, cas uint64, extras, key, value []byte, pb *pbuf) {
	var h [binHdrLen]byte
	h[0] = binResMagic
	h[1] = op
	binary.BigEndian.PutUint16(h[2:], uint16(len(key)))
	h[4] = byte(len(extras))
	binary.BigEndian.PutUint16(h[6:], status)
	binary.BigEndian.PutUint32(h[8:], uint32(len(extras)+len(key)+len(value)))
	binary.BigEndian.PutUint32(h[12:], rq.opaque)
	binary.BigEndian.PutUint64(h[16:], cas)
	o := &cn.out
	o.bytes(h[:])
	o.bytes(extras)
	o.bytes(key)
	o.raw(value, pb)
}
