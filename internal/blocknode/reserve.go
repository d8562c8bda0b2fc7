package blocknode

import (
	"fmt"
	"sync"
	"sync/atomic"

	"rackpool/internal/nbd"
)

// One writer per drive. The control plane keeps each drive's write
// reservation (internal/drive, reserve.go): one holder may write, and
// every change of holder raises the reservation's generation. A token
// with write rights carries the generation it was issued under. The node
// keeps, per drive, the highest generation it has seen, from the tokens it
// verified (the control plane signed them) and from heartbeat answers
// (Assigned.Generation, so a preempt fences the old writer even before the
// new one connects, and a node that takes the drive over after a failover
// starts from it). A connection whose token is of an older generation may
// read but not write: opening a drive with such a token for writing is
// refused, and every write, trim and write-zeroes of a connection opened
// before the generation rose fails with EPERM, like a stale epoch.
//
// Writes hold the drive's reservation lock for reading from the
// generation check to the end of the system call; raising the generation
// takes it for writing. So once a new generation is installed no write of
// an older one is still running or can start: the window the node lease
// leaves between its check and the pwrite (docs/storage.md, "Fencing")
// does not exist for a preempt on the same node.

// reservation is one drive's write-reservation state on this node.
type reservation struct {
	mu  sync.RWMutex  // read: a write in progress; write: raising gen
	gen atomic.Uint64 // the highest generation seen
}

// errPreempted answers a write of a connection whose reservation
// generation has passed.
var errPreempted = fmt.Errorf("%w: another holder has taken the drive's write reservation (preempt); this connection may only read", nbd.ErrPermission)

// raise installs gen if it is higher than the one held, once every write
// under the old generation has finished. It reports whether it did.
func (r *reservation) raise(gen uint64) bool {
	if gen <= r.gen.Load() {
		return false
	}
	if !r.mu.TryLock() {
		if testHookRaiseWaits != nil {
			testHookRaiseWaits()
		}
		r.mu.Lock() // writes are in progress: wait for them
	}
	defer r.mu.Unlock()
	if gen <= r.gen.Load() {
		return false
	}
	r.gen.Store(gen)
	return true
}

// Test hooks: testHookWriteWindow runs in every write between its checks
// and its system call, testHookRaiseWaits when a generation raise finds
// writes in progress and waits for them.
var testHookWriteWindow, testHookRaiseWaits func()

// admit checks a writer's token generation when it opens the drive: an
// older one than seen is refused, a newer one is installed (fencing the
// writers before it).
func (r *reservation) admit(drive string, gen uint64) error {
	r.raise(gen)
	if cur := r.gen.Load(); gen < cur {
		return fmt.Errorf("%w: the token's write reservation (generation %d) was superseded: drive %s's writer is now at generation %d",
			nbd.ErrPolicy, gen, drive, cur)
	}
	return nil
}

// lockWrite checks that f may write now (its generation is current, then
// its epoch, lease and rights) and holds the drive's reservation lock for
// reading until unlockWrite: a generation raise waits for the write.
func (f *fenced) lockWrite() error {
	r := &f.d.res
	r.mu.RLock()
	if f.gen < r.gen.Load() {
		r.mu.RUnlock()
		return errPreempted
	}
	if err := f.check(RightWrite); err != nil {
		r.mu.RUnlock()
		return err
	}
	if testHookWriteWindow != nil {
		testHookWriteWindow()
	}
	return nil
}

func (f *fenced) unlockWrite() { f.d.res.mu.RUnlock() }
