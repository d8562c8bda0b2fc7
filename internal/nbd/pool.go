package nbd

import (
	"math/bits"
	"sync"
)

// Payload buffers come from pools by power-of-two size class, from
// 2^minBufShift (smaller requests take the smallest class) to
// 2^maxBufShift; larger buffers are allocated and dropped.
const (
	minBufShift = 9
	maxBufShift = 30
)

var bufPools [maxBufShift - minBufShift + 1]sync.Pool

// getBuf returns a buffer of length n from the pools. Put it back with
// putBuf once nothing refers to it.
func getBuf(n int) *[]byte {
	c := bufClass(n)
	if c < 0 {
		b := make([]byte, n)
		return &b
	}
	if v, ok := bufPools[c].Get().(*[]byte); ok {
		*v = (*v)[:n]
		return v
	}
	b := make([]byte, n, 1<<(c+minBufShift))
	return &b
}

// putBuf returns a buffer from getBuf to its pool.
func putBuf(b *[]byte) {
	if b == nil {
		return
	}
	c := bufClass(cap(*b))
	if c < 0 || cap(*b) != 1<<(c+minBufShift) {
		return
	}
	*b = (*b)[:0]
	bufPools[c].Put(b)
}

// bufClass is the pool index for a buffer of n bytes, or -1 if none fits.
func bufClass(n int) int {
	if n <= 1<<minBufShift {
		return 0
	}
	c := bits.Len(uint(n-1)) - minBufShift
	if c >= len(bufPools) {
		return -1
	}
	return c
}

// zeroes is a read-only buffer of zero bytes for writing zeroes by hand.
var zeroes = make([]byte, 1<<20)
