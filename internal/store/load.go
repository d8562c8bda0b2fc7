package store

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
)

// Decode reads every object of kind and calls each with it and its data
// decoded from JSON into a new T, in the order Objects returns them: how a
// manager reads its records (registries, leases, grants) back at start-up
// and on becoming the leader. It stops at the first error: a read error,
// undecodable data (named by kind and ID), or each's.
func Decode[T any](ctx context.Context, st Store, kind string, each func(Object, *T) error) error {
	objs, err := st.Objects(ctx, kind)
	if err != nil {
		return err
	}
	for _, ob := range objs {
		v := new(T)
		if err := json.Unmarshal(ob.Data, v); err != nil {
			return fmt.Errorf("%s %s: %w", kind, ob.ID, err)
		}
		if err := each(ob, v); err != nil {
			return err
		}
	}
	return nil
}

// SecretKind is the kind of the objects that hold secrets made once (the
// token keys).
const SecretKind = "secret"

// TokenKey returns the token key kept as the SecretKind object with ID id,
// storing the one create makes on first start (Once: replicas starting
// together all get the one stored). A store written before the key was an
// object keeps it as a setting named id, in standard base64, and that one
// is used. A key that is not size bytes long is refused. The errors read
// "read token key: …", "store token key: …" and "stored token key is
// malformed"; the caller names its package.
func TokenKey(ctx context.Context, st Store, id string, size int, create func() ([]byte, error)) ([]byte, error) {
	v, ok, err := st.Setting(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("read token key: %w", err)
	}
	var k []byte
	if ok {
		if k, err = base64.StdEncoding.DecodeString(v); err != nil {
			k = nil
		}
	} else if k, err = Once(ctx, st, SecretKind, id, create); err != nil {
		return nil, fmt.Errorf("store token key: %w", err)
	}
	if len(k) != size {
		return nil, errors.New("stored token key is malformed")
	}
	return k, nil
}
