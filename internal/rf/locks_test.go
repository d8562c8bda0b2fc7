package rf

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

func TestLocksExclusive(t *testing.T) {
	var l Locks
	var mu sync.Mutex
	inside := map[string]int{}
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := []string{"a", "b"}[i%2]
			unlock, err := l.Lock(context.Background(), key)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			inside[key]++
			if inside[key] > 1 {
				t.Errorf("two holders of %s", key)
			}
			mu.Unlock()
			time.Sleep(time.Millisecond)
			mu.Lock()
			inside[key]--
			mu.Unlock()
			unlock()
			unlock() // a second call does nothing
		}()
	}
	wg.Wait()
	if n := l.size(); n != 0 {
		t.Errorf("%d keys left", n)
	}
}

func TestLocksWaitEnds(t *testing.T) {
	var l Locks
	unlock, err := l.Lock(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := l.Lock(ctx, "a"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waiting on a held key: %v", err)
	}
	other, err := l.Lock(context.Background(), "b") // another key is free
	if err != nil {
		t.Fatal(err)
	}
	other()
	// The holder hands the lock over from another goroutine.
	done := make(chan struct{})
	go func() {
		defer close(done)
		unlock()
	}()
	<-done
	again, err := l.Lock(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	again()
	if n := l.size(); n != 0 {
		t.Errorf("%d keys left", n)
	}
}
