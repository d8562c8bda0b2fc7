package nbd

import (
	"bytes"
	"testing"
)

func TestReadWriteRoundTrip(t *testing.T) {
	checkNoLeak(t)
	env := startEnv(t, nil)
	c := env.dial(t, "disk")
	ctx := testCtx(t)
	if c.Size() != testSize {
		t.Fatalf("Size = %d, want %d", c.Size(), testSize)
	}
	want := randBytes(1, 1<<20)
	if err := c.WriteAt(ctx, want, 4096, false); err != nil {
		t.Fatalf("WriteAt: %v", err)
	}
	got := make([]byte, len(want))
	if err := c.ReadAt(ctx, got, 4096); err != nil {
		t.Fatalf("ReadAt: %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("read back differs from written")
	}
}
