package cache

import (
	"strconv"
	"testing"
)

// BenchmarkSetGet measures the local tier's store and lookup path (what a
// memcached client's set and get cost inside the cache, without the
// network): parallel clients over 10,000 keys, 1 KiB values, nine gets
// per set. Stored without an expiry time, and with one (an hour, so none
// expires): a store then looks at the least recently used items for dead
// ones to reclaim first, as memcached's allocator does.
func BenchmarkSetGet(b *testing.B) {
	for _, bc := range []struct {
		name string
		ttl  int64
	}{{"no-expiry", 0}, {"expiring", 3600}} {
		b.Run(bc.name, func(b *testing.B) {
			c := mustNew(b, Options{LocalMemory: 64 << 20})
			keys := make([][]byte, 10000)
			for i := range keys {
				keys[i] = []byte("key:" + strconv.Itoa(i))
			}
			v := make([]byte, 1024)
			var exp int64
			if bc.ttl != 0 {
				exp = c.now() + bc.ttl
			}
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					k := keys[i%len(keys)]
					if i%10 == 0 {
						r := storeReq{key: k, value: v, mode: modeSet, exp: exp}
						c.store(&r, c.now())
					} else if h, ok := c.get(k, c.now(), false, 0); ok {
						putBuf(h.pb)
					}
					i += 7
				}
			})
		})
	}
}
