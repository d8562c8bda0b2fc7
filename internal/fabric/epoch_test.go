package fabric_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"rackpool/internal/fabric"
)

func TestFence(t *testing.T) {
	var f fabric.Fence
	ctx := context.Background()
	for _, step := range []struct {
		domain string
		epoch  int64 // 0: none
		ok     bool
	}{{"", 0, true}, {"", 3, true}, {"", 3, true}, {"", 2, false}, {"", 0, true}, {"", 4, true}, {"", 3, false}, {"", 1, false},
		// Domains count apart: a replica's epoch 1 is not fenced by
		// another's 4, and raising one fences only that one.
		{"member/a", 1, true}, {"member/b", 1, true}, {"member/a", 2, true}, {"member/a", 1, false}, {"member/b", 1, true}, {"", 3, false}} {
		err := f.Admit(fabric.WithEpoch(ctx, fabric.Epoch{Domain: step.domain, N: step.epoch}))
		if got := err == nil; got != step.ok || (!step.ok && !errors.Is(err, fabric.ErrFenced)) {
			t.Errorf("Admit(%q epoch %d) = %v, want ok %v", step.domain, step.epoch, err, step.ok)
		}
	}
	for _, v := range []string{"0", "-1", "x", "1.5", "3;", "3; a b", "3; " + strings.Repeat("a", 129), "; a", "3; é"} {
		if _, err := fabric.ParseEpoch(v); err == nil {
			t.Errorf("ParseEpoch(%q) accepted", v)
		}
	}
	for v, want := range map[string]fabric.Epoch{"7": {N: 7}, "7; member/cp1-42-ab": {Domain: "member/cp1-42-ab", N: 7}, "": {}} {
		if e, err := fabric.ParseEpoch(v); e != want || err != nil {
			t.Errorf("ParseEpoch(%q) = %v, %v", v, e, err)
		}
		if want.N > 0 && want.String() != v {
			t.Errorf("%+v.String() = %q, want %q", want, want.String(), v)
		}
	}
}
