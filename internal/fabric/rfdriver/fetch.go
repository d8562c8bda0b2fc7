package rfdriver

import (
	"context"
	"errors"
	"fmt"
	"rackpool/internal/rf"
	"sync"
)

// Bounds on reading a collection.
const (
	maxPages    = 64 // Members@odata.nextLink pages followed
	parallelGet = 4  // members read at once
)

// member is one resource read from a collection.
type member[T any] struct {
	ref  string // its @odata.id, as the collection lists it
	url  string // where it was read from
	etag string
	v    T
}

// listAll returns the member links of the collection at ref, following
// Members@odata.nextLink.
func listAll(ctx context.Context, c *client, ref string) ([]link, error) {
	var out []link
	next := ref
	for page := 0; next != ""; page++ {
		if page == maxPages {
			return nil, fmt.Errorf("GET %s: more than %d pages of members", ref, maxPages)
		}
		var coll collection
		r, err := c.get(ctx, next, &coll)
		if err != nil {
			return nil, err
		}
		for i, m := range coll.Members {
			if m.ID == "" {
				return nil, fmt.Errorf("GET %s: Members[%d] has no @odata.id", r.URL, i)
			}
		}
		out = append(out, coll.Members...)
		next = coll.NextLink
	}
	return out, nil
}

// fetchAll reads every member of the collection at ref. A member that
// disappears between the listing and its read is left out.
func fetchAll[T any](ctx context.Context, c *client, ref string) ([]member[T], error) {
	refs, err := listAll(ctx, c, ref)
	if err != nil {
		return nil, err
	}
	out := make([]member[T], len(refs))
	gone := make([]bool, len(refs))
	idx := make([]int, len(refs))
	for i := range idx {
		idx[i] = i
	}
	err = forEach(ctx, idx, func(ctx context.Context, i int) error {
		out[i].ref = refs[i].ID
		r, err := c.get(ctx, refs[i].ID, &out[i].v)
		var nf *notFoundError
		switch {
		case errors.As(err, &nf):
			gone[i] = true
		case err != nil:
			return err
		default:
			out[i].url, out[i].etag = r.URL, etagOf(r)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	kept := out[:0]
	for i := range out {
		if !gone[i] {
			kept = append(kept, out[i])
		}
	}
	return kept, nil
}

// etagOf is the answer's ETag header, or its @odata.etag property.
func etagOf(r *rf.Reply) string {
	if e := r.Header.Get("ETag"); e != "" {
		return e
	}
	var body struct {
		ETag string `json:"@odata.etag"`
	}
	if r.Decode(&body) == nil {
		return body.ETag
	}
	return ""
}

// forEach calls fn for every item, parallelGet at a time, and returns the
// first error (in item order).
func forEach[T any](ctx context.Context, items []T, fn func(context.Context, T) error) error {
	errs := make([]error, len(items))
	sem := make(chan struct{}, parallelGet)
	var wg sync.WaitGroup
	for i, it := range items {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			errs[i] = fn(ctx, it)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
