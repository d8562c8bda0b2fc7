package store

import (
	"context"
	"errors"
	"fmt"
)

// Once returns the data of the object of kind with id, storing what
// create makes when there is none. Replicas starting together on one
// database may all find none and all create one: the first plan to commit
// stores its object (a put at version 1 conflicts with any other), the
// others re-read it, and every caller returns the one stored, so all
// agree. For what is made once and never changed (a token key).
func Once(ctx context.Context, st Store, kind, id string, create func() ([]byte, error)) ([]byte, error) {
	for attempt := 1; ; attempt++ {
		objs, err := st.Objects(ctx, kind)
		if err != nil {
			return nil, err
		}
		for _, o := range objs {
			if o.ID == id {
				return o.Data, nil
			}
		}
		if attempt == 2 {
			return nil, fmt.Errorf("store: %s %q: another writer's conflicting put left nothing stored", kind, id)
		}
		data, err := create()
		if err != nil {
			return nil, err
		}
		err = st.Apply(ctx, Plan{Objects: []ObjectChange{{Kind: kind, Object: Object{ID: id, Data: data, Version: 1}}}})
		if !errors.Is(err, ErrConflict) {
			return data, err
		}
	}
}
