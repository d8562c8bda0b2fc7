package fabric_test

import (
	"context"
	"errors"
	"testing"

	"rackpool/internal/fabric"
)

func TestFence(t *testing.T) {
	var f fabric.Fence
	ctx := context.Background()
	for _, step := range []struct {
		epoch int64 // 0: none
		ok    bool
	}{{0, true}, {3, true}, {3, true}, {2, false}, {0, true}, {4, true}, {3, false}, {1, false}} {
		err := f.Admit(fabric.WithEpoch(ctx, step.epoch))
		if got := err == nil; got != step.ok || (!step.ok && !errors.Is(err, fabric.ErrFenced)) {
			t.Errorf("Admit(epoch %d) = %v, want ok %v", step.epoch, err, step.ok)
		}
	}
	for _, v := range []string{"0", "-1", "x", "1.5"} {
		if _, err := fabric.ParseEpoch(v); err == nil {
			t.Errorf("ParseEpoch(%q) accepted", v)
		}
	}
	if e, err := fabric.ParseEpoch("7"); e != 7 || err != nil {
		t.Errorf("ParseEpoch(7) = %d, %v", e, err)
	}
}
