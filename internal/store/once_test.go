package store_test

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"rackpool/internal/store"
	"rackpool/internal/store/sqlite"
)

// racing holds back the first n Applies until all n have arrived: n
// callers of Once all find nothing stored and all try to store.
type racing struct {
	store.Store
	arrived atomic.Int32
	n       int32
	all     sync.WaitGroup
}

func (r *racing) Apply(ctx context.Context, p store.Plan) error {
	if r.arrived.Add(1) <= r.n {
		r.all.Done()
		r.all.Wait()
	}
	return r.Store.Apply(ctx, p)
}

// TestOnceTogether: callers creating the same object together all return
// the one stored, and a later caller creates nothing.
func TestOnceTogether(t *testing.T) {
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	const n = 4
	r := &racing{Store: st, n: n}
	r.all.Add(n)
	got := make([][]byte, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			got[i], errs[i] = store.Once(context.Background(), r, "secret", "k", func() ([]byte, error) {
				return fmt.Appendf(nil, "made by %d", i), nil
			})
		})
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil || !bytes.Equal(got[i], got[0]) {
			t.Fatalf("caller %d: %q %v; caller 1: %q", i+1, got[i], errs[i], got[0])
		}
	}
	later, err := store.Once(context.Background(), st, "secret", "k", func() ([]byte, error) {
		t.Error("made again with one stored")
		return nil, nil
	})
	if err != nil || !bytes.Equal(later, got[0]) {
		t.Fatalf("later: %q %v, want %q", later, err, got[0])
	}
}
