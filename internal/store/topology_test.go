package store_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"rackpool/internal/store"
	"rackpool/internal/store/sqlite"
)

// TestRecordTopology: the first replica records its topology; a replica
// that keeps the database's refuses another, naming both; one that leads
// on its own records the change and says which digest it replaced.
func TestRecordTopology(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := store.CheckTopology(ctx, st, "rack", "d1"); err != nil {
		t.Fatalf("check on an empty database: %v", err)
	}
	if was, err := store.RecordTopology(ctx, st, "rack", "d1", true); err != nil || was != "" {
		t.Fatalf("first record = %q, %v", was, err)
	}
	if was, err := store.RecordTopology(ctx, st, "rack", "d1", true); err != nil || was != "" {
		t.Fatalf("the same topology again = %q, %v", was, err)
	}
	for _, tc := range []struct {
		name string
		err  func() error
	}{
		{"check", func() error { return store.CheckTopology(ctx, st, "pod", "d2") }},
		{"record keeping", func() error { _, err := store.RecordTopology(ctx, st, "pod", "d2", true); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.err()
			var m *store.TopologyMismatch
			if !errors.As(err, &m) || *m != (store.TopologyMismatch{Name: "pod", Digest: "d2", StoredName: "rack", StoredDigest: "d1"}) {
				t.Fatalf("got %v, want a mismatch of pod/d2 against rack/d1", err)
			}
			if !strings.Contains(err.Error(), `"pod" (digest d2) is not the one the database is served with, "rack" (digest d1)`) {
				t.Errorf("message %q", err)
			}
		})
	}
	if was, err := store.RecordTopology(ctx, st, "pod", "d2", false); err != nil || was != "d1" {
		t.Fatalf("a changed topology on a replica leading alone = %q, %v; want it recorded over d1", was, err)
	}
	if d, _, _ := st.Setting(ctx, store.TopologyDigestKey); d != "d2" {
		t.Errorf("digest %q after the change, want d2", d)
	}
	if n, _, _ := st.Setting(ctx, store.TopologyNameKey); n != "pod" {
		t.Errorf("name %q after the change, want pod", n)
	}
	if err := store.CheckTopology(ctx, st, "pod", "d2"); err != nil {
		t.Errorf("check after the change: %v", err)
	}
}
