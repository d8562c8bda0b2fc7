package store

import (
	"context"
	"errors"
	"testing"
)

func TestPrepareApply(t *testing.T) {
	ctx := context.Background()
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	put := Plan{Objects: []ObjectChange{{Kind: "k", Object: Object{ID: "a", Data: []byte("{}"), Version: 1}}}}
	for _, tc := range []struct {
		name    string
		ctx     context.Context
		closed  bool
		p       Plan
		want    error
		prepare bool
	}{
		{"a plan", ctx, false, put, nil, true},
		{"an empty plan", ctx, false, Plan{}, nil, false},
		{"closed", ctx, true, put, ErrClosed, false},
		{"cancelled", cancelled, false, put, context.Canceled, false},
		{"invalid", ctx, false, Plan{Check: []ObjectRef{{Kind: "k"}}}, errors.New("any"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pp, err := PrepareApply(tc.ctx, tc.closed, tc.p)
			switch {
			case tc.want == nil && err != nil, tc.want != nil && err == nil:
				t.Fatalf("PrepareApply = %v, want %v", err, tc.want)
			case tc.want == ErrClosed || tc.want == context.Canceled:
				if !errors.Is(err, tc.want) {
					t.Fatalf("PrepareApply = %v, want %v", err, tc.want)
				}
			}
			if (pp != nil) != tc.prepare {
				t.Fatalf("prepared plan %+v, want one: %v", pp, tc.prepare)
			}
			if pp != nil && (len(pp.Objects) != 1 || string(pp.Objects[0].Object.Data) != "{}") {
				t.Errorf("prepared objects %+v", pp.Objects)
			}
		})
	}
}
