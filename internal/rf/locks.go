package rf

import (
	"context"
	"sync"
)

// Locks serialise the conditional changes of a service per key (a
// resource's path, a port): the If-Match check, the change and whatever
// of it runs on in the background hold the key's lock, so of two writers
// sending the same ETag exactly one succeeds and the other sees the new
// ETag. A waiter never waits longer than its context allows. The zero
// value is ready.
type Locks struct {
	mu    sync.Mutex
	locks map[string]*keyLock
}

type keyLock struct {
	held  chan struct{} // holds a token while the key is locked
	users int           // holders and waiters
}

// Lock locks key and returns the unlock function, which another goroutine
// may call (a change going on as a task), and which does nothing after
// its first call. It waits at most until ctx ends; then it fails with
// ctx's error and the key stays as it was. Entries are dropped when no
// one holds or waits for them.
func (l *Locks) Lock(ctx context.Context, key string) (func(), error) {
	l.mu.Lock()
	if l.locks == nil {
		l.locks = map[string]*keyLock{}
	}
	k := l.locks[key]
	if k == nil {
		k = &keyLock{held: make(chan struct{}, 1)}
		l.locks[key] = k
	}
	k.users++
	l.mu.Unlock()
	release := func() {
		l.mu.Lock()
		if k.users--; k.users == 0 {
			delete(l.locks, key)
		}
		l.mu.Unlock()
	}
	select {
	case k.held <- struct{}{}:
	case <-ctx.Done():
		release()
		return nil, ctx.Err()
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			<-k.held
			release()
		})
	}, nil
}

// size is how many keys are held or waited for.
func (l *Locks) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.locks)
}
