package cache

import (
	"encoding/base64"
	"strconv"
)

// The meta protocol (mg, ms, md, ma, mn, me), following memcached 1.6's
// proto_text.c: flags are single characters, some with a token; replies echo
// O(paque) and k(ey) and add the requested metadata in request order.

const (
	maxMetaTokens = 20 // memcached's MFLAG_MAX_OPT_LENGTH, counting the terminal token
	maxOpaque     = 32
)

// metaFlags is the result of the flag pre-parse (_meta_flag_preparse).
type metaFlags struct {
	noUpdate, vivify, value, setStale, noReply bool
	hasCAS, newTTL, keyBinary, hasNewCAS       bool
	mode                                       byte
	exp, vivExp, recache                       int64
	clientFlags                                uint32
	reqCAS, newCAS, delta, initial             uint64
}

// errReply sends an error even under q (memcached's out_errstring).
func (cn *conn) errReply(s string) {
	cn.noreply = false
	cn.reply(s)
}

// metaPreparse parses the flags from token start on; it decodes a base64
// key in cn.key. It returns the error reply, or "" when the flags are good.
func (cn *conn) metaPreparse(n, start int, of *metaFlags) (key []byte, errstr string) {
	key = cn.toks[1]
	var seen [128]bool
	failed := false
	errstr = msgBadFormat
	for i := start; i < n; i++ {
		t := cn.toks[i]
		f := t[0]
		if f >= 127 || seen[f] {
			return key, "CLIENT_ERROR duplicate flag"
		}
		seen[f] = true
		switch f {
		case 'b':
			dec, err := base64.StdEncoding.AppendDecode(cn.key[:0], key)
			if err != nil || len(dec) == 0 {
				errstr, failed = "CLIENT_ERROR error decoding key", true
				key = key[:0]
			} else {
				cn.key = dec
				key = dec
			}
			of.keyBinary = true
		case 'N', 'T', 'R':
			v, ok := strtol32(t[1:])
			if !ok {
				errstr, failed = "CLIENT_ERROR bad token in command line format", true
				break
			}
			exp := realtime(int64(v), cn.now)
			switch f {
			case 'N':
				of.vivify, of.vivExp = true, exp
			case 'T':
				of.exp, of.newTTL = exp, true
			case 'R':
				of.recache = exp
			}
		case 'l', 'O', 'P', 'L', 'k', 's', 't', 'c', 'f', 'h':
		case 'v':
			of.value = true
		case 'u':
			of.noUpdate = true
		case 'q':
			of.noReply = true
		case 'F':
			v, ok := strtoul32(t[1:])
			if !ok {
				failed = true
			}
			of.clientFlags = v
		case 'C':
			v, ok := strtoull(t[1:])
			if !ok {
				errstr, failed = "CLIENT_ERROR bad token in command line format", true
			} else {
				of.reqCAS, of.hasCAS = v, true
			}
		case 'E': // newer memcached: explicit new CAS value
			v, ok := strtoull(t[1:])
			if !ok {
				errstr, failed = "CLIENT_ERROR bad token in command line format", true
			} else {
				of.newCAS, of.hasNewCAS = v, true
			}
		case 'M':
			if len(t) != 2 {
				errstr, failed = "CLIENT_ERROR incorrect length for M token", true
			} else {
				of.mode = t[1]
			}
		case 'J':
			v, ok := strtoull(t[1:])
			if !ok {
				errstr, failed = "CLIENT_ERROR invalid numeric initial value", true
			}
			of.initial = v
		case 'D':
			v, ok := strtoull(t[1:])
			if !ok {
				errstr, failed = "CLIENT_ERROR invalid numeric delta value", true
			}
			of.delta = v
		case 'I':
			of.setStale = true
		default:
			return key, "CLIENT_ERROR invalid flag"
		}
	}
	if failed {
		return key, errstr
	}
	return key, ""
}

// appendKey appends " k<key>", base64 encoded with a " b" flag for binary keys.
func appendKey(h []byte, key []byte, binary bool) []byte {
	h = append(h, " k"...)
	if !binary {
		return append(h, key...)
	}
	h = base64.StdEncoding.AppendEncode(h, key)
	return append(h, " b"...)
}

func appendTTL(h []byte, exp, now int64) []byte {
	h = append(h, " t"...)
	if exp == 0 {
		return append(h, "-1"...)
	}
	return strconv.AppendInt(h, exp-now, 10)
}

// opaqueOK checks every O token's length.
func (cn *conn) opaqueOK(n, start int) bool {
	for i := start; i < n; i++ {
		if cn.toks[i][0] == 'O' && len(cn.toks[i]) > maxOpaque {
			return false
		}
	}
	return true
}

// metaEcho appends the O and k flags of a reply that has no item.
func (cn *conn) metaEcho(h []byte, n, start int, key []byte, binary bool) []byte {
	for i := start; i < n; i++ {
		switch t := cn.toks[i]; t[0] {
		case 'O':
			h = append(h, ' ')
			h = append(h, t...)
		case 'k':
			h = appendKey(h, key, binary)
		}
	}
	return h
}

func (cn *conn) metaGet(n int, _ []byte) error {
	c := cn.c
	if n+1 < 3 {
		cn.reply("ERROR")
		return nil
	}
	if len(cn.toks[1]) > maxKeyLen {
		cn.errReply(msgBadFormat)
		return nil
	}
	if n+1 > maxMetaTokens {
		cn.errReply("CLIENT_ERROR options flags are too long")
		return nil
	}
	var of metaFlags
	key, errstr := cn.metaPreparse(n, 2, &of)
	if errstr != "" {
		cn.errReply(errstr)
		return nil
	}
	cn.noreply = of.noReply
	if !cn.opaqueOK(n, 2) {
		cn.errReply("CLIENT_ERROR opaque token too long")
		return nil
	}
	if of.vivify {
		c.reclaim(cn.now) // a miss stores a new item
	}
	sh := c.shardFor(key)
	for attempt := 0; attempt < maxAttempts; attempt++ {
		sh.mu.Lock()
		e := c.lookupLocked(sh, key, cn.now)
		created := false
		if e == nil && of.vivify {
			e = &item{key: string(key), value: []byte{}, cas: c.nextCAS(), mtime: uint32(cn.now), atime: uint32(cn.now)}
			if of.keyBinary {
				e.bits |= bitKeyBinary
			}
			c.linkLocked(sh, e)
			created = true
		}
		if e == nil {
			c.countGet(sh, of.newTTL, nil)
			sh.mu.Unlock()
			cn.metaGetMiss(n, key, &of)
			return nil
		}
		vlen := len(e.value)
		if e.where == whereRemote {
			vlen = int(e.vlen)
		}
		h := cn.hdr[:0]
		if of.value {
			h = append(h, "VA "...)
			h = strconv.AppendInt(h, int64(vlen), 10)
		} else {
			h = append(h, "HD"...)
		}
		won := false
		for i := 2; i < n; i++ {
			switch t := cn.toks[i]; t[0] {
			case 'T':
				sh.setExp(e, of.exp)
			case 'N':
				if created {
					sh.setExp(e, of.vivExp)
					won = true
				}
			case 'R':
				if e.bits&bitTokenSent == 0 && !created && e.exp != 0 && e.exp < of.recache {
					won = true
				}
			case 's':
				h = append(h, " s"...)
				h = strconv.AppendInt(h, int64(vlen), 10)
			case 't':
				h = appendTTL(h, e.exp, cn.now)
			case 'c':
				h = append(h, " c"...)
				h = strconv.AppendUint(h, e.cas, 10)
			case 'f':
				h = append(h, " f"...)
				h = strconv.AppendUint(h, uint64(e.flags), 10)
			case 'l':
				h = append(h, " l"...)
				h = strconv.AppendInt(h, cn.now-int64(e.atime), 10)
			case 'h':
				if e.bits&bitFetched != 0 {
					h = append(h, " h1"...)
				} else {
					h = append(h, " h0"...)
				}
			case 'O':
				h = append(h, ' ')
				h = append(h, t...)
			case 'k':
				h = appendKey(h, []byte(e.key), e.bits&bitKeyBinary != 0)
			}
		}
		if e.bits&bitTokenSent != 0 {
			h = append(h, " Z"...)
		}
		if e.bits&bitStale != 0 {
			h = append(h, " X"...)
			if e.bits&bitTokenSent == 0 {
				won = true
			}
		}
		if won {
			h = append(h, " W"...)
			e.bits |= bitTokenSent
		}
		h = append(h, "\r\n"...)
		cn.hdr = h
		if !of.noUpdate {
			e.bits |= bitFetched
			e.atime = uint32(cn.now)
			if e.where == whereLocal {
				c.bump(sh, e)
			}
		}
		c.countGet(sh, of.newTTL, e)
		if !of.value || e.where != whereRemote {
			v := e.value
			sh.mu.Unlock()
			cn.out.bytes(h)
			if of.value {
				cn.out.value(v, nil)
			}
			return nil
		}
		ref := refOf(e)
		sh.mu.Unlock()
		pb, v, again := c.fetchRemote(&ref)
		if again {
			continue
		}
		if pb == nil {
			cn.metaGetMiss(n, key, &of)
			return nil
		}
		cn.out.bytes(cn.hdr)
		cn.out.value(v, pb)
		if c.promote {
			c.promoteRemote(&ref, v)
		}
		return nil
	}
	cn.metaGetMiss(n, key, &of)
	return nil
}

func (cn *conn) metaGetMiss(n int, key []byte, of *metaFlags) {
	if cn.noreply {
		return
	}
	h := append(cn.hdr[:0], "EN"...)
	h = cn.metaEcho(h, n, 2, key, of.keyBinary)
	h = append(h, "\r\n"...)
	cn.hdr = h
	cn.out.bytes(h)
}

func (cn *conn) metaSet(n int, _ []byte) error {
	c := cn.c
	if n+1 < 3 {
		cn.reply("ERROR")
		return nil
	}
	if len(cn.toks[1]) > maxKeyLen || n+1 == 3 {
		cn.errReply(msgBadFormat)
		return nil
	}
	if n+1 > maxMetaTokens {
		cn.errReply("CLIENT_ERROR options flags too long")
		return nil
	}
	vlen, ok := strtol32(cn.toks[2])
	if !ok || vlen < 0 || vlen > 1<<31-1-2 {
		cn.errReply(msgBadFormat)
		return nil
	}
	var of metaFlags
	key, errstr := cn.metaPreparse(n, 3, &of)
	if errstr == "" {
		cn.noreply = of.noReply
		if !cn.opaqueOK(n, 3) {
			errstr = "CLIENT_ERROR opaque token too long"
		}
	}
	mode := modeSet
	if errstr == "" {
		switch of.mode {
		case 0, 'S', 's':
		case 'E', 'e':
			mode = modeAdd
		case 'A', 'a':
			mode = modeAppend
		case 'P', 'p':
			mode = modePrepend
		case 'R', 'r':
			mode = modeReplace
		default:
			errstr = "CLIENT_ERROR invalid mode for ms M token"
		}
	}
	if errstr == "" && c.itemTooLarge(len(key), of.clientFlags, int(vlen)) {
		c.st.storeTooLarge.Add(1)
		errstr = msgTooLarge
		c.delete(key, cn.now)
	} else if errstr == "" && !c.fits(itemSize(len(key), int(vlen))) {
		errstr = msgNoMemory
		c.delete(key, cn.now)
	}
	if errstr != "" {
		cn.errReply(errstr)
		return cn.swallow(int(vlen) + 2)
	}
	if of.hasCAS && (mode == modeSet || mode == modeReplace) {
		mode = modeCAS
	}
	var kb [maxKeyLen]byte
	k := kb[:copy(kb[:], key)]
	// The flag tokens live in the read buffer too: note what the reply
	// needs before reading the value.
	var flagBuf [maxMetaTokens]byte
	var opaque [maxMetaTokens][]byte
	nf := 0
	for i := 3; i < n && nf < len(flagBuf); i++ {
		switch t := cn.toks[i]; t[0] {
		case 'O':
			opaque[nf] = append([]byte(nil), t...)
			flagBuf[nf] = 'O'
			nf++
		case 'k', 'c':
			flagBuf[nf] = t[0]
			nf++
		}
	}
	v, ok, err := cn.readValue(int(vlen))
	if err != nil {
		return err
	}
	if !ok {
		cn.errReply(msgBadChunk)
		return nil
	}
	req := storeReq{key: k, value: v, flags: of.clientFlags, exp: of.exp, mode: mode, cas: of.reqCAS,
		setStale: of.setStale && mode == modeCAS, newCAS: of.newCAS, keyBinary: of.keyBinary}
	res, cas := c.store(&req, cn.now)
	h := cn.hdr[:0]
	switch res {
	case resStored:
		if cn.noreply {
			return nil
		}
		h = append(h, "HD"...)
	case resNotStored:
		h = append(h, "NS"...)
	case resExists:
		h = append(h, "EX"...)
	case resNotFound:
		h = append(h, "NF"...)
	default:
		cn.errReply(msgNoMemory)
		return nil
	}
	for i := 0; i < nf; i++ {
		switch flagBuf[i] {
		case 'O':
			h = append(h, ' ')
			h = append(h, opaque[i]...)
		case 'k':
			h = appendKey(h, k, of.keyBinary)
		case 'c':
			h = append(h, " c"...)
			h = strconv.AppendUint(h, cas, 10)
		}
	}
	h = append(h, "\r\n"...)
	cn.hdr = h
	cn.out.bytes(h)
	return nil
}

func (cn *conn) metaDelete(n int, _ []byte) error {
	c := cn.c
	if n+1 < 3 {
		cn.reply("ERROR")
		return nil
	}
	if len(cn.toks[1]) > maxKeyLen {
		cn.reply(msgBadFormat)
		return nil
	}
	if n+1 > maxMetaTokens {
		cn.reply("CLIENT_ERROR options flags too long")
		return nil
	}
	var of metaFlags
	key, errstr := cn.metaPreparse(n, 2, &of)
	if errstr != "" {
		cn.errReply("CLIENT_ERROR invalid or duplicate flag")
		return nil
	}
	cn.noreply = of.noReply
	if !cn.opaqueOK(n, 2) {
		cn.errReply("CLIENT_ERROR opaque token too long")
		return nil
	}
	sh := c.shardFor(key)
	sh.mu.Lock()
	e := c.lookupLocked(sh, key, cn.now)
	var code string
	switch {
	case e == nil:
		sh.st.deleteMisses++
		code = "NF"
	case of.hasCAS && e.cas != of.reqCAS:
		sh.st.deleteMisses++
		code = "EX"
	case of.setStale:
		if of.newTTL {
			sh.setExp(e, of.exp)
		}
		e.bits |= bitStale
		e.bits &^= bitTokenSent
		if of.hasNewCAS {
			e.cas = of.newCAS
		} else {
			e.cas = c.nextCAS()
		}
		code = "HD"
	default:
		sh.st.deleteHits++
		c.class(e).deleteHits.Add(1)
		c.removeLocked(sh, e)
		code = "HD"
	}
	sh.mu.Unlock()
	if code == "HD" && cn.noreply {
		return nil
	}
	h := append(cn.hdr[:0], code...)
	h = cn.metaEcho(h, n, 2, key, of.keyBinary)
	h = append(h, "\r\n"...)
	cn.hdr = h
	cn.out.bytes(h)
	return nil
}

func (cn *conn) metaArith(n int, _ []byte) error {
	c := cn.c
	if n+1 < 3 {
		cn.reply("ERROR")
		return nil
	}
	if len(cn.toks[1]) > maxKeyLen {
		cn.reply(msgBadFormat)
		return nil
	}
	if n+1 > maxMetaTokens {
		cn.reply("CLIENT_ERROR options flags too long")
		return nil
	}
	of := metaFlags{delta: 1}
	key, errstr := cn.metaPreparse(n, 2, &of)
	if errstr != "" {
		cn.errReply("CLIENT_ERROR invalid or duplicate flag")
		return nil
	}
	cn.noreply = of.noReply
	incr := true
	switch of.mode {
	case 0, 'I', 'i', '+':
	case 'D', 'd', '-':
		incr = false
	default:
		cn.errReply("CLIENT_ERROR invalid mode for ma M token")
		return nil
	}
	if !cn.opaqueOK(n, 2) {
		cn.errReply("CLIENT_ERROR opaque token too long")
		return nil
	}
	req := deltaReq{key: key, incr: incr, delta: of.delta, vivify: of.vivify, vivExp: of.vivExp, initial: of.initial, newCAS: of.newCAS}
	if of.hasCAS {
		req.cas = of.reqCAS
	}
	var num [20]byte
	var digits []byte
	// The reply line is built under the shard lock, where T and N also set
	// the item's expiry, in request order like memcached.
	build := func(e *item, created bool) {
		h := cn.hdr[:0]
		if of.value {
			h = append(h, "VA "...)
			h = strconv.AppendInt(h, int64(len(digits)), 10)
		} else {
			h = append(h, "HD"...)
		}
		for i := 2; i < n; i++ {
			switch t := cn.toks[i]; t[0] {
			case 'c':
				h = append(h, " c"...)
				h = strconv.AppendUint(h, e.cas, 10)
			case 't':
				h = appendTTL(h, e.exp, cn.now)
			case 'T':
				c.shardForString(e.key).setExp(e, of.exp) // apply runs under that shard's lock
			case 'N':
				if created {
					c.shardForString(e.key).setExp(e, of.vivExp)
				}
			case 'O':
				h = append(h, ' ')
				h = append(h, t...)
			case 'k':
				h = appendKey(h, key, of.keyBinary)
			}
		}
		h = append(h, "\r\n"...)
		cn.hdr = h
	}
	res, _ := c.arith(&req, cn.now, func(e *item, created bool) {
		v, _ := parseStoredUint(e.value)
		digits = strconv.AppendUint(num[:0], v, 10)
		build(e, created)
	})
	switch res {
	case deltaOK:
	case deltaNonNumeric:
		cn.errReply(msgNonNumeric)
		return nil
	case deltaNoMemory:
		cn.errReply("SERVER_ERROR out of memory")
		return nil
	case deltaNotFound, deltaCASMismatch:
		code := "NF"
		if res == deltaCASMismatch {
			code = "EX"
		}
		h := append(cn.hdr[:0], code...)
		h = cn.metaEcho(h, n, 2, key, of.keyBinary)
		h = append(h, "\r\n"...)
		cn.hdr = h
		cn.out.bytes(h)
		return nil
	}
	if cn.noreply {
		return nil
	}
	cn.out.bytes(cn.hdr)
	if of.value {
		cn.out.bytes(digits)
		cn.out.str("\r\n")
	}
	return nil
}

func (cn *conn) metaDebug(n int) error {
	c := cn.c
	if n+1 < 3 || len(cn.toks[1]) > maxKeyLen {
		cn.reply(msgBadFormat)
		return nil
	}
	key := cn.toks[1]
	if n+1 >= 4 && string(cn.toks[2]) == "b" {
		dec, err := base64.StdEncoding.AppendDecode(cn.key[:0], key)
		if err != nil || len(dec) == 0 {
			cn.reply(msgBadFormat)
			return nil
		}
		cn.key = dec
		key = dec
	}
	sh := c.shardFor(key)
	sh.mu.Lock()
	e := c.lookupLocked(sh, key, cn.now)
	if e == nil {
		sh.mu.Unlock()
		cn.reply("EN")
		return nil
	}
	h := append(cn.hdr[:0], "ME "...)
	if e.bits&bitKeyBinary != 0 {
		h = base64.StdEncoding.AppendEncode(h, []byte(e.key))
	} else {
		h = append(h, e.key...)
	}
	h = append(h, " exp="...)
	if e.exp == 0 {
		h = append(h, "-1"...)
	} else {
		h = strconv.AppendInt(h, e.exp-cn.now, 10)
	}
	h = append(h, " la="...)
	h = strconv.AppendInt(h, cn.now-int64(e.atime), 10)
	h = append(h, " cas="...)
	h = strconv.AppendUint(h, e.cas, 10)
	if e.bits&bitFetched != 0 {
		h = append(h, " fetch=yes"...)
	} else {
		h = append(h, " fetch=no"...)
	}
	h = append(h, " cls=1 size="...)
	var size int64
	switch e.where {
	case whereRemote:
		size = itemSize(len(e.key), int(e.vlen))
		h = strconv.AppendInt(h, size, 10)
		h = append(h, " tier=remote"...)
	default:
		size = e.localSize()
		h = strconv.AppendInt(h, size, 10)
	}
	sh.mu.Unlock()
	h = append(h, "\r\n"...)
	cn.hdr = h
	cn.out.bytes(h)
	return nil
}
