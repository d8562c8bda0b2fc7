package cache

import (
	"bytes"
	"cmp"
	"fmt"
	"net"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"rackpool/internal/netserve"
)

// Version is what the version command and stats report: the memcached
// release whose protocol this server follows, tagged.
const Version = "1.6.18-rackpool"

// Reply strings shared by several commands.
const (
	msgBadFormat    = "CLIENT_ERROR bad command line format"
	msgBadChunk     = "CLIENT_ERROR bad data chunk"
	msgTooLarge     = "SERVER_ERROR object too large for cache"
	msgNoMemory     = "SERVER_ERROR out of memory storing object"
	msgBadExptime   = "CLIENT_ERROR invalid exptime argument"
	msgBadDelta     = "CLIENT_ERROR invalid numeric delta argument"
	msgNonNumeric   = "CLIENT_ERROR cannot increment or decrement non-numeric value"
	msgDeleteFormat = "CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]"
)

// dispatch handles one command line (memcached's process_command_ascii).
// ntok below counts memcached's terminal token, so it is n+1.
func (cn *conn) dispatch(line []byte) error {
	cn.noreply = false
	n, rest := cn.tokenize(line)
	ntok := n + 1
	if n == 0 || len(cn.toks[0]) < 2 {
		cn.reply("ERROR")
		return nil
	}
	cmd := cn.toks[0]
	if cmd[0] == 'm' && len(cmd) == 2 {
		cn.c.st.cmdMeta.Add(1)
		switch cmd[1] {
		case 'g':
			return cn.metaGet(n, rest)
		case 's':
			return cn.metaSet(n, rest)
		case 'd':
			return cn.metaDelete(n, rest)
		case 'a':
			return cn.metaArith(n, rest)
		case 'n':
			cn.reply("MN")
			return cn.flush()
		case 'e':
			return cn.metaDebug(n)
		}
		cn.reply("ERROR")
		return nil
	}
	switch string(cmd) {
	case "get", "bget":
		if ntok < 3 {
			cn.reply("ERROR")
			return nil
		}
		cn.cmdGet(line, false, false)
	case "gets":
		if ntok < 3 {
			cn.reply("ERROR")
			return nil
		}
		cn.cmdGet(line, true, false)
	case "gat", "gats":
		if ntok < 3 {
			cn.reply("ERROR")
			return nil
		}
		cn.cmdGet(line, len(cmd) == 4, true)
	case "set", "add", "replace", "append", "prepend":
		if ntok != 6 && ntok != 7 {
			cn.reply("ERROR")
			return nil
		}
		return cn.cmdUpdate(n, storeModes[string(cmd)], false)
	case "cas":
		if ntok != 7 && ntok != 8 {
			cn.reply("ERROR")
			return nil
		}
		return cn.cmdUpdate(n, modeCAS, true)
	case "incr", "decr":
		if ntok != 4 && ntok != 5 {
			cn.reply("ERROR")
			return nil
		}
		cn.cmdArith(n, cmd[0] == 'i')
	case "delete":
		if ntok < 3 || ntok > 5 {
			cn.reply("ERROR")
			return nil
		}
		cn.cmdDelete(n)
	case "touch":
		if ntok != 4 && ntok != 5 {
			cn.reply("ERROR")
			return nil
		}
		cn.cmdTouch(n)
	case "stats":
		cn.cmdStats(n)
	case "flush_all":
		if ntok < 2 || ntok > 4 {
			cn.reply("ERROR")
			return nil
		}
		cn.cmdFlush(n)
	case "version":
		cn.reply("VERSION " + Version)
	case "quit":
		return errQuit
	case "verbosity":
		if ntok != 3 && ntok != 4 {
			cn.reply("ERROR")
			return nil
		}
		cn.setNoreply(n)
		lvl, ok := strtoul32(cn.toks[1])
		if !ok {
			cn.reply(msgBadFormat)
			return nil
		}
		cn.c.verbosity.Store(int32(min(lvl, 2)))
		cn.reply("OK")
	case "cache_memlimit":
		if ntok != 3 && ntok != 4 {
			cn.reply("ERROR")
			return nil
		}
		cn.cmdMemlimit(n)
	case "shutdown":
		cn.reply("ERROR: shutdown not enabled")
	default:
		// memcached hangs up on an HTTP request line: an unknown command
		// whose last token starts with "HTTP/", unless its first letter is
		// one memcached dispatches on first (a, c, d, g, i, s, t: those
		// answer ERROR there).
		if !strings.ContainsRune("acdgist", rune(cmd[0])) && bytes.HasPrefix(cn.toks[n-1], []byte("HTTP/")) {
			return errHangUp
		}
		cn.reply("ERROR")
	}
	_ = rest
	return nil
}

var storeModes = map[string]storeMode{
	"set": modeSet, "add": modeAdd, "replace": modeReplace, "append": modeAppend, "prepend": modePrepend,
}

// setNoreply is memcached's set_noreply_maybe: the last token "noreply".
func (cn *conn) setNoreply(n int) bool {
	if n > 0 && string(cn.toks[n-1]) == "noreply" {
		cn.noreply = true
	}
	return cn.noreply
}

// cmdGet serves get, gets, gat and gats over every key of the line.
func (cn *conn) cmdGet(line []byte, withCAS, touch bool) {
	c := cn.c
	// Skip the command word (and for gat the exptime) by walking tokens.
	i := skipToken(line, 0)
	var exp int64
	if touch {
		j := skipToken(line, i)
		v, ok := strtol32(trimSpaces(line[i:j]))
		if !ok {
			cn.reply(msgBadExptime)
			return
		}
		exp = realtime(int64(v), cn.now)
		i = j
	}
	o := &cn.out
	start := o.mark()
	for {
		for i < len(line) && line[i] == ' ' {
			i++
		}
		if i >= len(line) {
			break
		}
		j := i
		for j < len(line) && line[j] != ' ' {
			j++
		}
		key := line[i:j]
		i = j
		if len(key) > maxKeyLen {
			// memcached answers the whole command with the error: the
			// values of the keys before this one are not sent.
			o.rollback(start)
			o.str(msgBadFormat + "\r\n")
			return
		}
		h, ok := c.get(key, cn.now, touch, exp)
		c.detail.record(key, prefixGet, ok)
		if !ok {
			continue
		}
		o.str("VALUE ")
		o.bytes(key)
		o.byte(' ')
		o.uint(uint64(h.flags))
		o.byte(' ')
		o.uint(uint64(len(h.value)))
		if withCAS {
			o.byte(' ')
			o.uint(h.cas)
		}
		o.str("\r\n")
		o.value(h.value, h.pb)
	}
	o.str("END\r\n")
}

// skipToken returns the index just past the token starting at or after i.
func skipToken(line []byte, i int) int {
	for i < len(line) && line[i] == ' ' {
		i++
	}
	for i < len(line) && line[i] != ' ' {
		i++
	}
	return i
}

func trimSpaces(b []byte) []byte { return bytes.Trim(b, " ") }

// itemTooLarge is memcached's item_size_ok for the default slab settings:
// the item header, key, suffix, CAS and value with "\r\n" must fit in
// MaxItemSize.
func (c *Cache) itemTooLarge(klen int, flags uint32, vlen int) bool {
	size := 48 + 8 + klen + 1 + vlen + 2
	if flags != 0 {
		size += 4
	}
	return size > c.maxItem
}

// cmdUpdate handles set/add/replace/append/prepend/cas
// (process_update_command and complete_nread_ascii).
func (cn *conn) cmdUpdate(n int, mode storeMode, withCAS bool) error {
	c := cn.c
	cn.setNoreply(n)
	key := cn.toks[1]
	if len(key) > maxKeyLen {
		cn.reply(msgBadFormat)
		return nil
	}
	flags, ok1 := strtoul32(cn.toks[2])
	exptime, ok2 := strtol32(cn.toks[3])
	vlen, ok3 := strtol32(cn.toks[4])
	if !ok1 || !ok2 || !ok3 {
		cn.reply(msgBadFormat)
		return nil
	}
	var casIn uint64
	if withCAS {
		var ok bool
		if casIn, ok = strtoull(cn.toks[5]); !ok {
			cn.reply(msgBadFormat)
			return nil
		}
	}
	if vlen < 0 || vlen > 1<<31-1-2 {
		cn.reply(msgBadFormat)
		return nil
	}
	c.detail.record(key, prefixSet, false)
	if c.itemTooLarge(len(key), flags, int(vlen)) || !c.fits(itemSize(len(key), int(vlen))) {
		if c.itemTooLarge(len(key), flags, int(vlen)) {
			c.st.storeTooLarge.Add(1)
			cn.reply(msgTooLarge)
		} else {
			cn.reply(msgNoMemory)
		}
		if mode == modeSet {
			c.delete(key, cn.now) // no stale data survives a failed set
		}
		return cn.swallow(int(vlen) + 2)
	}
	// The key token lives in the read buffer, which reading the value may
	// overwrite: copy it first.
	var kb [maxKeyLen]byte
	k := kb[:copy(kb[:], key)]
	v, ok, err := cn.readValue(int(vlen))
	if err != nil {
		return err
	}
	if !ok {
		cn.reply(msgBadChunk)
		return nil
	}
	req := storeReq{key: k, value: v, flags: flags, exp: realtime(int64(exptime), cn.now), mode: mode, cas: casIn}
	if withCAS && casIn == 0 {
		// memcached: a zero CAS never matches.
		req.cas = 0
	}
	res, _ := c.store(&req, cn.now)
	cn.reply(storeReplies[res])
	return nil
}

var storeReplies = [...]string{
	resStored:    "STORED",
	resNotStored: "NOT_STORED",
	resExists:    "EXISTS",
	resNotFound:  "NOT_FOUND",
	resNoMemory:  msgNoMemory,
}

func (cn *conn) cmdArith(n int, incr bool) {
	cn.setNoreply(n)
	key := cn.toks[1]
	if len(key) > maxKeyLen {
		cn.reply(msgBadFormat)
		return
	}
	delta, ok := strtoull(cn.toks[2])
	if !ok {
		cn.reply(msgBadDelta)
		return
	}
	res, out := cn.c.arith(&deltaReq{key: key, incr: incr, delta: delta}, cn.now, nil)
	switch res {
	case deltaOK:
		if !cn.noreply {
			cn.out.uint(out.value)
			cn.out.str("\r\n")
		}
	case deltaNonNumeric:
		cn.reply(msgNonNumeric)
	case deltaNotFound:
		cn.reply("NOT_FOUND")
	case deltaNoMemory:
		cn.reply("SERVER_ERROR out of memory")
	}
}

func (cn *conn) cmdDelete(n int) {
	if n > 2 {
		holdZero := string(cn.toks[2]) == "0"
		nr := cn.setNoreply(n)
		valid := (n == 3 && (holdZero || nr)) || (n == 4 && holdZero && nr)
		if !valid {
			cn.reply(msgDeleteFormat)
			return
		}
	}
	key := cn.toks[1]
	if len(key) > maxKeyLen {
		cn.reply(msgBadFormat)
		return
	}
	cn.c.detail.record(key, prefixDel, false)
	if cn.c.delete(key, cn.now) {
		cn.reply("DELETED")
	} else {
		cn.reply("NOT_FOUND")
	}
}

func (cn *conn) cmdTouch(n int) {
	cn.setNoreply(n)
	key := cn.toks[1]
	if len(key) > maxKeyLen {
		cn.reply(msgBadFormat)
		return
	}
	v, ok := strtol32(cn.toks[2])
	if !ok {
		cn.reply(msgBadExptime)
		return
	}
	if cn.c.touch(key, cn.now, realtime(int64(v), cn.now)) {
		cn.reply("TOUCHED")
	} else {
		cn.reply("NOT_FOUND")
	}
}

func (cn *conn) cmdFlush(n int) {
	nr := cn.setNoreply(n)
	var delay int32
	want := 1
	if nr {
		want = 2
	}
	if n != want {
		v, ok := strtol32(cn.toks[1])
		if !ok {
			cn.c.st.cmdFlush.Add(1)
			cn.reply(msgBadExptime)
			return
		}
		delay = v
	}
	if delay > 0 {
		cn.c.flush(realtime(int64(delay), cn.now))
	} else {
		cn.c.flush(0)
	}
	cn.reply("OK")
}

func (cn *conn) cmdMemlimit(n int) {
	cn.setNoreply(n)
	mb, ok := strtoul32(cn.toks[1])
	switch {
	case !ok:
		cn.reply("ERROR")
	case mb < 8:
		cn.reply("MEMLIMIT_TOO_SMALL cannot set maxbytes to less than 8m")
	case mb > 1000000000:
		cn.reply("MEMLIMIT_ADJUST_FAILED input value is megabytes not bytes")
	default:
		cn.c.limit.Store(int64(mb) << 20)
		cn.c.evictIfNeeded()
		cn.reply("OK")
	}
}

// cmdStats answers "stats" and its common sub-commands.
func (cn *conn) cmdStats(n int) {
	c := cn.c
	o := &cn.out
	stat := func(name string, v string) {
		o.str("STAT ")
		o.str(name)
		o.byte(' ')
		o.str(v)
		o.str("\r\n")
	}
	if n == 1 {
		for _, kv := range c.generalStats() {
			stat(kv[0], kv[1])
		}
		o.str("END\r\n")
		return
	}
	switch string(cn.toks[1]) {
	case "reset":
		c.resetStats()
		cn.reply("RESET")
	case "settings":
		for _, kv := range c.settingsStats() {
			stat(kv[0], kv[1])
		}
		o.str("END\r\n")
	case "items", "slabs", "sizes", "conns":
		for _, kv := range c.groupStats(string(cn.toks[1]), cn) {
			stat(kv[0], kv[1])
		}
		o.str("END\r\n")
	case "sizes_enable":
		c.enableSizes()
		stat("sizes_status", "enabled") // memcached sends no END here
	case "sizes_disable":
		c.sizes.Store(nil)
		stat("sizes_status", "disabled")
	case "detail":
		if n < 3 {
			cn.reply("CLIENT_ERROR usage: stats detail on|off|dump")
			return
		}
		switch string(cn.toks[2]) {
		case "on", "off":
			c.detail.on.Store(string(cn.toks[2]) == "on")
			cn.reply("OK")
		case "dump":
			o.str(c.detail.dump())
		default:
			cn.reply("CLIENT_ERROR usage: stats detail on|off|dump")
		}
	case "cachedump":
		if n < 4 {
			cn.reply("CLIENT_ERROR bad command line")
			return
		}
		id, ok1 := strtoul32(cn.toks[2])
		_, ok2 := strtoul32(cn.toks[3])
		if !ok1 || !ok2 {
			cn.reply(msgBadFormat)
			return
		}
		if id >= 64 {
			cn.reply("CLIENT_ERROR Illegal slab id")
			return
		}
		o.str("END\r\n")
	default:
		cn.reply("ERROR")
	}
}

// groupStats is the reply to `stats GROUP` for items, slabs, sizes and
// conns (text and binary), in memcached's order; self is the asking
// connection (stats conns reports it parsing a command).
func (c *Cache) groupStats(group string, self *conn) [][2]string {
	var out [][2]string
	stat := func(name, v string) { out = append(out, [2]string{name, v}) }
	i64 := func(v int64) string { return strconv.FormatInt(v, 10) }
	switch group {
	case "items":
		for cls := 1; cls < len(slabSizes); cls++ {
			cs := &c.classes[cls]
			n := cs.number.Load()
			if n <= 0 {
				continue
			}
			cc := c.classReport(cls)
			p := "items:" + strconv.Itoa(cls) + ":"
			for _, kv := range [...]struct {
				name string
				v    int64
			}{
				{"number", n}, {"number_hot", 0}, {"number_warm", 0}, {"number_cold", n},
				{"age_hot", 0}, {"age_warm", 0}, {"age", 0}, {"mem_requested", cs.requested.Load()},
				{"evicted", cc.evicted}, {"evicted_nonzero", cc.evictedNonzero}, {"evicted_time", 0},
				{"outofmemory", 0}, {"tailrepairs", 0}, {"reclaimed", cc.reclaimed},
				{"expired_unfetched", cc.expiredUnfetched}, {"evicted_unfetched", cc.evictedUnfetched},
				{"evicted_active", 0}, {"crawler_reclaimed", 0}, {"crawler_items_checked", 0}, {"lrutail_reflocked", 0},
				{"moves_to_cold", 0}, {"moves_to_warm", 0}, {"moves_within_lru", 0}, {"direct_reclaims", 0},
				{"hits_to_hot", 0}, {"hits_to_warm", 0}, {"hits_to_cold", cc.getHits + cc.touchHits}, {"hits_to_temp", 0},
			} {
				stat(p+kv.name, i64(kv.v))
			}
		}
	case "slabs":
		active, pages := 0, int64(0)
		for cls := 1; cls < len(slabSizes); cls++ {
			cs := &c.classes[cls]
			np := cs.pages.Load()
			if np == 0 {
				continue
			}
			active++
			pages += np
			used := cs.number.Load()
			total := np * perSlab(cls)
			cc := c.classReport(cls)
			p := strconv.Itoa(cls) + ":"
			for _, kv := range [...]struct {
				name string
				v    int64
			}{
				{"chunk_size", int64(slabSizes[cls])}, {"chunks_per_page", perSlab(cls)}, {"total_pages", np},
				{"total_chunks", total}, {"used_chunks", used}, {"free_chunks", total - used}, {"free_chunks_end", 0},
				{"get_hits", cc.getHits}, {"cmd_set", cc.cmdSet}, {"delete_hits", cc.deleteHits},
				{"incr_hits", cc.incrHits}, {"decr_hits", cc.decrHits}, {"cas_hits", cc.casHits},
				{"cas_badval", cc.casBadval}, {"touch_hits", cc.touchHits},
			} {
				stat(p+kv.name, i64(kv.v))
			}
		}
		stat("active_slabs", strconv.Itoa(active))
		stat("total_malloced", i64(pages*slabPageSize))
	case "sizes":
		h := c.sizes.Load()
		if h == nil {
			stat("sizes_status", "disabled")
		} else {
			for b := range h.buckets {
				if n := h.buckets[b].Load(); n > 0 {
					stat(strconv.Itoa(b*32), i64(n))
				}
			}
		}
	case "conns":
		now := c.now()
		type entry struct {
			id    int64
			lines [][2]string
		}
		var es []entry
		up := i64(int64(c.clock.Now().Sub(c.started) / time.Second))
		c.net.Listeners(func(l net.Listener, id int64) {
			es = append(es, entry{id, [][2]string{{"addr", "tcp:" + l.Addr().String()}, {"state", "conn_listening"},
				{"secs_since_last_cmd", up}}})
		})
		c.net.Conns(func(tc *netserve.Conn[*conn]) {
			other := tc.State
			state := "conn_waiting"
			if other == self {
				state = "conn_parse_cmd"
			}
			es = append(es, entry{other.id, [][2]string{{"addr", "tcp:" + other.nc.RemoteAddr().String()},
				{"listen_addr", "tcp:" + other.nc.LocalAddr().String()}, {"state", state},
				{"secs_since_last_cmd", i64(now - other.lastCmd.Load())}}})
		})
		slices.SortFunc(es, func(a, b entry) int { return cmp.Compare(a.id, b.id) })
		for _, e := range es {
			for _, kv := range e.lines {
				stat(strconv.FormatInt(e.id, 10)+":"+kv[0], kv[1])
			}
		}
	}
	return out
}

func boolStat(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// generalStats is the reply to a plain "stats", in memcached's order
// followed by the tier counters.
func (c *Cache) generalStats() [][2]string {
	s := c.reportedStats()
	now := c.clock.Now()
	i64 := func(v int64) string { return strconv.FormatInt(v, 10) }
	user, sys := rusage()
	var itemBytes, expiredUnfetched, evictedUnfetched int64
	for cls := range c.classes {
		itemBytes += c.classes[cls].requested.Load()
		cc := c.classReport(cls)
		expiredUnfetched += cc.expiredUnfetched
		evictedUnfetched += cc.evictedUnfetched
	}
	// memcached 1.6's fields in its order; those naming memcached
	// internals rackpool does not have (response objects, read buffers,
	// the slab mover, the LRU crawler and maintainer, the logger) are 0.
	return [][2]string{
		{"pid", strconv.Itoa(os.Getpid())},
		{"uptime", i64(int64(now.Sub(c.started) / time.Second))},
		{"time", i64(now.Unix())},
		{"version", Version},
		{"libevent", "go"},
		{"pointer_size", "64"},
		{"rusage_user", user},
		{"rusage_system", sys},
		{"max_connections", "1024"},
		{"curr_connections", i64(s.CurrConnections)},
		{"total_connections", i64(s.TotalConnections)},
		{"rejected_connections", "0"},
		{"connection_structures", i64(s.CurrConnections)},
		{"response_obj_oom", "0"},
		{"response_obj_count", "0"},
		{"response_obj_bytes", "0"},
		{"read_buf_count", "0"},
		{"read_buf_bytes", "0"},
		{"read_buf_bytes_free", "0"},
		{"read_buf_oom", "0"},
		{"reserved_fds", "0"},
		{"cmd_get", i64(s.CmdGet)},
		{"cmd_set", i64(s.CmdSet)},
		{"cmd_flush", i64(s.CmdFlush)},
		{"cmd_touch", i64(s.CmdTouch)},
		{"cmd_meta", i64(s.CmdMeta)},
		{"get_hits", i64(s.GetHits)},
		{"get_misses", i64(s.GetMisses)},
		{"get_expired", i64(s.GetExpired)},
		{"get_flushed", i64(s.GetFlushed)},
		{"delete_misses", i64(s.DeleteMisses)},
		{"delete_hits", i64(s.DeleteHits)},
		{"incr_misses", i64(s.IncrMisses)},
		{"incr_hits", i64(s.IncrHits)},
		{"decr_misses", i64(s.DecrMisses)},
		{"decr_hits", i64(s.DecrHits)},
		{"cas_misses", i64(s.CasMisses)},
		{"cas_hits", i64(s.CasHits)},
		{"cas_badval", i64(s.CasBadval)},
		{"touch_hits", i64(s.TouchHits)},
		{"touch_misses", i64(s.TouchMisses)},
		{"store_too_large", i64(s.StoreTooLarge)},
		{"store_no_memory", i64(s.StoreNoMemory)},
		{"auth_cmds", "0"},
		{"auth_errors", "0"},
		{"bytes_read", i64(s.BytesRead)},
		{"bytes_written", i64(s.BytesWritten)},
		{"limit_maxbytes", i64(s.LimitBytes)},
		{"accepting_conns", "1"},
		{"listen_disabled_num", "0"},
		{"time_in_listen_disabled_us", "0"},
		{"threads", strconv.Itoa(runtime.GOMAXPROCS(0))},
		{"conn_yields", "0"},
		{"hash_power_level", "0"},
		{"hash_bytes", "0"},
		{"hash_is_expanding", "0"},
		{"slab_reassign_rescues", "0"},
		{"slab_reassign_chunk_rescues", "0"},
		{"slab_reassign_evictions_nomem", "0"},
		{"slab_reassign_inline_reclaim", "0"},
		{"slab_reassign_busy_items", "0"},
		{"slab_reassign_busy_deletes", "0"},
		{"slab_reassign_running", "0"},
		{"slabs_moved", "0"},
		{"lru_crawler_running", "0"},
		{"lru_crawler_starts", "0"},
		{"lru_maintainer_juggles", "0"},
		{"malloc_fails", "0"},
		{"log_worker_dropped", "0"},
		{"log_worker_written", "0"},
		{"log_watcher_skipped", "0"},
		{"log_watcher_sent", "0"},
		{"log_watchers", "0"},
		{"unexpected_napi_ids", "0"},
		{"round_robin_fallback", "0"},
		{"bytes", i64(itemBytes)},
		{"curr_items", i64(s.LocalItems + s.RemoteItems)},
		{"total_items", i64(s.TotalItems)},
		{"slab_global_page_pool", "0"},
		{"expired_unfetched", i64(expiredUnfetched)},
		{"evicted_unfetched", i64(evictedUnfetched)},
		{"evicted_active", "0"},
		{"evictions", i64(s.Evictions)},
		{"reclaimed", i64(s.Reclaimed)},
		{"crawler_reclaimed", "0"},
		{"crawler_items_checked", "0"},
		{"lrutail_reflocked", "0"},
		{"moves_to_cold", "0"},
		{"moves_to_warm", "0"},
		{"moves_within_lru", "0"},
		{"direct_reclaims", "0"},
		{"lru_bumps_dropped", "0"},
		{"local_items", i64(s.LocalItems)},
		{"local_bytes", i64(s.LocalBytes)},
		{"used_bytes", i64(s.UsedBytes)},
		{"remote_attached", boolStat(s.RemoteAttached)},
		{"remote_healthy", boolStat(s.RemoteHealthy)},
		{"remote_items", i64(s.RemoteItems)},
		{"remote_bytes", i64(s.RemoteBytes)},
		{"remote_index_bytes", i64(s.IndexBytes)},
		{"remote_hits", i64(s.RemoteHits)},
		{"remote_read_bytes", i64(s.RemoteReadBytes)},
		{"remote_misses", i64(s.RemoteMisses)},
		{"remote_errors", i64(s.RemoteErrors)},
		{"remote_corrupt", i64(s.RemoteCorrupt)},
		{"remote_spills", i64(s.Spills)},
		{"remote_spill_drops", i64(s.SpillDrops)},
		{"remote_promotions", i64(s.Promotions)},
		{"remote_compactions", i64(s.Compactions)},
		{"remote_compacted_items", i64(s.CompactedItems)},
		{"remote_evictions", i64(s.RemoteEvictions)},
		{"remote_evicted_bytes", i64(s.RemoteEvictedBytes)},
		{"remote_moves", i64(s.RemoteMoves)},
		{"remote_moved", i64(s.RemoteMoved)},
		{"remote_move_drops", i64(s.RemoteMoveDrops)},
	}
}

// rusage returns the process's user and system CPU time as memcached
// prints them.
func rusage() (user, sys string) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return "0.000000", "0.000000"
	}
	f := func(tv syscall.Timeval) string { return fmt.Sprintf("%d.%06d", tv.Sec, tv.Usec) }
	return f(ru.Utime), f(ru.Stime)
}

// settingsStats is `stats settings`: memcached 1.6's fields in its order
// with rackpool's values. Mechanisms rackpool does not have (slab
// reassignment, the LRU crawler and maintainer, segmented LRUs, extstore,
// TLS, UDP) are reported off.
func (c *Cache) settingsStats() [][2]string {
	port, inter := "0", "NULL"
	first := true
	c.net.Listeners(func(l net.Listener, _ int64) {
		if a, ok := l.Addr().(*net.TCPAddr); ok && first {
			port, inter = strconv.Itoa(a.Port), a.IP.String()
		}
		first = false
	})
	threads := strconv.Itoa(runtime.GOMAXPROCS(0))
	track := "no"
	if c.sizes.Load() != nil {
		track = "yes"
	}
	return [][2]string{
		{"maxbytes", strconv.FormatInt(c.limit.Load(), 10)},
		{"maxconns", "1024"},
		{"tcpport", port},
		{"udpport", "0"},
		{"inter", inter},
		{"verbosity", strconv.Itoa(int(c.verbosity.Load()))},
		{"oldest", "0"},
		{"evictions", "on"},
		{"domain_socket", "NULL"},
		{"umask", "700"},
		{"shutdown_command", "no"},
		{"growth_factor", "1.25"},
		{"chunk_size", strconv.Itoa(slabChunkMin)},
		{"num_threads", threads},
		{"num_threads_per_udp", threads},
		{"stat_key_prefix", ":"},
		{"detail_enabled", yesNo(c.detail.on.Load())},
		{"reqs_per_event", "20"},
		{"cas_enabled", "yes"},
		{"tcp_backlog", "1024"},
		{"binding_protocol", "auto-negotiate"},
		{"auth_enabled_sasl", "no"},
		{"auth_enabled_ascii", "no"},
		{"item_size_max", strconv.Itoa(c.maxItem)},
		{"maxconns_fast", "yes"},
		{"hashpower_init", "0"},
		{"slab_reassign", "no"},
		{"slab_automove", "0"},
		{"slab_automove_ratio", "0.80"},
		{"slab_automove_window", "30"},
		{"slab_chunk_max", strconv.Itoa(slabChunkMax)},
		{"lru_crawler", "no"},
		{"lru_crawler_sleep", "100"},
		{"lru_crawler_tocrawl", "0"},
		{"tail_repair_time", "0"},
		{"flush_enabled", "yes"},
		{"dump_enabled", "yes"},
		{"hash_algorithm", "maphash"},
		{"lru_maintainer_thread", "no"},
		{"lru_segmented", "no"},
		{"hot_lru_pct", "20"},
		{"warm_lru_pct", "40"},
		{"hot_max_factor", "0.20"},
		{"warm_max_factor", "2.00"},
		{"temp_lru", "no"},
		{"temporary_ttl", "61"},
		{"idle_timeout", "0"},
		{"watcher_logbuf_size", "262144"},
		{"worker_logbuf_size", "65536"},
		{"read_buf_mem_limit", "0"},
		{"track_sizes", track},
		{"inline_ascii_response", "no"},
		{"ext_item_size", "512"},
		{"ext_item_age", "4294967295"},
		{"ext_low_ttl", "0"},
		{"ext_recache_rate", "2000"},
		{"ext_wbuf_size", "4194304"},
		{"ext_compact_under", "0"},
		{"ext_drop_under", "0"},
		{"ext_max_sleep", "1000000"},
		{"ext_max_frag", "0.80"},
		{"slab_automove_freeratio", "0.010"},
		{"ext_drop_unread", "no"},
		{"ssl_enabled", "no"},
		{"ssl_chain_cert", "(null)"},
		{"ssl_key", "(null)"},
		{"ssl_verify_mode", "0"},
		{"ssl_keyformat", "1"},
		{"ssl_ciphers", "NULL"},
		{"ssl_ca_cert", "NULL"},
		{"ssl_wbuf_size", "16384"},
		{"ssl_session_cache", "no"},
		{"ssl_kernel_tls", "no"},
		{"ssl_min_version", "tlsv1.2"},
		{"num_napi_ids", "(null)"},
		{"memory_file", "(null)"},
	}
}
