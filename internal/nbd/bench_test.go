package nbd

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
)

// The benchmarks run the Client against the Server over loopback TCP on
// a file export: the whole data path, for profiling
// (go test -bench ReadWrite -cpuprofile ...).

func BenchmarkReadWrite4K(b *testing.B)  { benchReadWrite(b, 4<<10) }
func BenchmarkReadWrite64K(b *testing.B) { benchReadWrite(b, 64<<10) }

func benchReadWrite(b *testing.B, size int) {
	env := startEnv(b, nil)
	ctx := context.Background()
	c, err := Dial(ctx, "tcp", env.tcp, "disk")
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	// Allocate the file so reads hit data, not holes.
	if err := c.WriteAt(ctx, make([]byte, testSize), 0, false); err != nil {
		b.Fatal(err)
	}
	blocks := uint64(testSize / size)
	for _, op := range []string{"read", "write"} {
		for _, qd := range []int{1, 16} {
			b.Run(fmt.Sprintf("%s/qd%d", op, qd), func(b *testing.B) {
				b.SetBytes(int64(size))
				b.ReportAllocs()
				if qd == 1 {
					buf := make([]byte, size)
					r := rand.New(rand.NewPCG(1, 2))
					for b.Loop() {
						if err := benchOp(ctx, c, op, buf, r.Uint64N(blocks)*uint64(size)); err != nil {
							b.Fatal(err)
						}
					}
					return
				}
				b.SetParallelism((qd + 1) / 2)
				b.RunParallel(func(pb *testing.PB) {
					buf := make([]byte, size)
					r := rand.New(rand.NewPCG(rand.Uint64(), 2))
					for pb.Next() {
						if err := benchOp(ctx, c, op, buf, r.Uint64N(blocks)*uint64(size)); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		}
	}
}

func benchOp(ctx context.Context, c *Client, op string, buf []byte, off uint64) error {
	if op == "read" {
		return c.ReadAt(ctx, buf, off)
	}
	return c.WriteAt(ctx, buf, off, false)
}
