package cache

import (
	"bytes"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// prefixDelimiter separates a key's prefix from the rest (memcached's -D,
// whose default is ':').
const prefixDelimiter = ':'

// prefixStats are memcached's per-prefix statistics (`stats detail`).
// While they are on, the text and binary get commands (with their hits),
// storage commands and deletes count each key that contains the delimiter
// under the part before it; meta commands, incr/decr and touch are not
// counted, as in memcached. `stats detail dump` lists the prefixes in the
// order they were first seen (memcached lists them in its hash table's
// order); `stats reset` forgets them. Off by default: then the commands pay
// one atomic load.
type prefixStats struct {
	on    atomic.Bool
	mu    sync.Mutex
	m     map[string]*prefixCount
	order []string
}

type prefixCount struct{ get, hit, set, del uint64 }

// Kinds of prefix events.
const (
	prefixGet = iota
	prefixSet
	prefixDel
)

// record counts one event for key's prefix, when detail is on and key has
// one.
func (p *prefixStats) record(key []byte, kind int, hit bool) {
	if !p.on.Load() {
		return
	}
	i := bytes.IndexByte(key, prefixDelimiter)
	if z := bytes.IndexByte(key, 0); z >= 0 && (i < 0 || z < i) {
		return // memcached's C string stops at a NUL
	}
	if i < 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	pc := p.m[string(key[:i])]
	if pc == nil {
		if p.m == nil {
			p.m = make(map[string]*prefixCount)
		}
		pc = &prefixCount{}
		p.m[string(key[:i])] = pc
		p.order = append(p.order, string(key[:i]))
	}
	switch kind {
	case prefixGet:
		pc.get++
		if hit {
			pc.hit++
		}
	case prefixSet:
		pc.set++
	case prefixDel:
		pc.del++
	}
}

// dump is the reply to `stats detail dump`, END included.
func (p *prefixStats) dump() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var b strings.Builder
	for _, prefix := range p.order {
		pc := p.m[prefix]
		b.WriteString("PREFIX ")
		b.WriteString(prefix)
		for _, f := range [...]struct {
			name string
			v    uint64
		}{{" get ", pc.get}, {" hit ", pc.hit}, {" set ", pc.set}, {" del ", pc.del}} {
			b.WriteString(f.name)
			b.WriteString(strconv.FormatUint(f.v, 10))
		}
		b.WriteString("\r\n")
	}
	b.WriteString("END\r\n")
	return b.String()
}

// clear forgets every prefix (stats reset); whether detail is on stays.
func (p *prefixStats) clear() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.m, p.order = nil, nil
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
