package cache

import (
	"strconv"
	"testing"
)

// BenchmarkSetGet measures the local tier's store and lookup path (what a
// memcached client's set and get cost inside the cache, without the
// network): parallel clients over 10,000 keys, 1 KiB values, nine gets
// per set.
func BenchmarkSetGet(b *testing.B) {
	c := mustNew(b, Options{LocalMemory: 64 << 20})
	keys := make([][]byte, 10000)
	for i := range keys {
		keys[i] = []byte("key:" + strconv.Itoa(i))
	}
	v := make([]byte, 1024)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			k := keys[i%len(keys)]
			if i%10 == 0 {
				r := storeReq{key: k, value: v, mode: modeSet}
				c.store(&r, c.now())
			} else if h, ok := c.get(k, c.now(), false, 0); ok {
				putBuf(h.pb)
			}
			i += 7
		}
	})
}
