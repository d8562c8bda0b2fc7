package store_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"rackpool/internal/store"
	"rackpool/internal/store/sqlite"
)

func openSQLite(t *testing.T) store.Store {
	t.Helper()
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func TestDecode(t *testing.T) {
	ctx := context.Background()
	st := openSQLite(t)
	type node struct {
		ID   string `json:"id"`
		Addr string `json:"addr"`
	}
	for _, o := range []store.Object{
		{ID: "b", Data: []byte(`{"id":"b","addr":"10.0.0.2"}`)},
		{ID: "a", Data: []byte(`{"id":"a","addr":"10.0.0.1"}`)},
	} {
		if err := st.PutObject(ctx, "node", o); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	err := store.Decode(ctx, st, "node", func(ob store.Object, n *node) error {
		if ob.ID != n.ID || ob.Version < 1 {
			t.Errorf("object %s (version %d) decoded as %+v", ob.ID, ob.Version, n)
		}
		got = append(got, n.ID+"="+n.Addr)
		return nil
	})
	if err != nil || strings.Join(got, " ") != "a=10.0.0.1 b=10.0.0.2" {
		t.Fatalf("Decode: %q, %v", got, err)
	}
	stop := errors.New("stop")
	calls := 0
	if err := store.Decode(ctx, st, "node", func(store.Object, *node) error { calls++; return stop }); err != stop || calls != 1 {
		t.Errorf("each's error: %v after %d calls, want stop after 1", err, calls)
	}
	if err := st.PutObject(ctx, "node", store.Object{ID: "c", Data: []byte(`{"id":`)}); err != nil {
		t.Fatal(err)
	}
	err = store.Decode(ctx, st, "node", func(store.Object, *node) error { return nil })
	if err == nil || !strings.HasPrefix(err.Error(), "node c: ") {
		t.Errorf("undecodable object: %v, want an error naming node c", err)
	}
}

func TestTokenKey(t *testing.T) {
	ctx := context.Background()
	made := 0
	create := func() ([]byte, error) { made++; return bytes.Repeat([]byte{byte(made)}, 32), nil }

	st := openSQLite(t)
	k, err := store.TokenKey(ctx, st, "x.token-key", 32, create)
	if err != nil || len(k) != 32 || made != 1 {
		t.Fatalf("first start: %x, %v, made %d", k, err, made)
	}
	again, err := store.TokenKey(ctx, st, "x.token-key", 32, create)
	if err != nil || !bytes.Equal(again, k) || made != 1 {
		t.Fatalf("restart: %x, %v, made %d; want the stored %x", again, err, made, k)
	}
	objs, err := st.Objects(ctx, store.SecretKind)
	if err != nil || len(objs) != 1 || objs[0].ID != "x.token-key" {
		t.Fatalf("stored secrets: %+v, %v", objs, err)
	}

	// A store written before keys were objects keeps the key as a setting.
	old := openSQLite(t)
	legacy := bytes.Repeat([]byte{0xee}, 32)
	if err := old.PutSetting(ctx, "x.token-key", base64.StdEncoding.EncodeToString(legacy)); err != nil {
		t.Fatal(err)
	}
	if k, err := store.TokenKey(ctx, old, "x.token-key", 32, create); err != nil || !bytes.Equal(k, legacy) || made != 1 {
		t.Fatalf("key kept as a setting: %x, %v, made %d", k, err, made)
	}
	for _, bad := range []string{"not base64!", base64.StdEncoding.EncodeToString(legacy[:16])} {
		if err := old.PutSetting(ctx, "x.token-key", bad); err != nil {
			t.Fatal(err)
		}
		if _, err := store.TokenKey(ctx, old, "x.token-key", 32, create); err == nil || err.Error() != "stored token key is malformed" {
			t.Errorf("setting %q: %v, want malformed", bad, err)
		}
	}
	if _, err := store.TokenKey(ctx, openSQLite(t), "y", 16, create); err == nil {
		t.Error("a key of the wrong size was accepted")
	}
}
