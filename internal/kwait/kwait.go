// Package kwait reads a socket whose reader has nothing else to do while
// it waits, blocking in the kernel instead of parking on Go's network
// poller.
//
// A connection at queue depth 1 spends most of its time waiting: a server
// for the client's next request, a client for the reply to its one
// request. Go's network poller makes each such wait a read that fails
// with EAGAIN, a park of the goroutine, a trip through the scheduler and
// epoll, and a wake-up: on this project's 2-core machines about twice the
// CPU of a thread blocked in the kernel, which is how nbdkit's and
// memcached's threads wait (a 64-byte ping-pong over loopback took 45 µs
// and 22 µs of CPU per round trip with the poller, 28 µs and 14 µs
// blocked in ppoll). A [Reader] reads a socket and, while its Block is
// set, waits for data blocked in ppoll, for at most [MaxWait]; only then
// does it park on the poller, so an idle connection holds no thread.
//
// The wait is a system call to the runtime: a garbage collection does not
// wait for it. But the thread keeps its P until the runtime's monitor
// takes it back (20 µs to 10 ms later), and goroutines that become ready
// meanwhile may have no P to run on. Kernel waits therefore pay only in a
// process that serves one conversation at a time, and are kept to that. A
// server's connections are conversations ([NewReader] with conversation
// set, until [Reader.Close]); one is busy while it had data within the
// last [Busy]. A reader waits in the kernel only if no other
// conversation is busy and at most MaxConversations are open; at most
// GOMAXPROCS-1 threads wait at once (one where GOMAXPROCS is 1), so a P is
// free for the goroutines that become ready (and while one is idle the
// runtime leaves the waiting thread's P alone); a wait lasts at most
// MaxWait, and a reader whose wait ran out (its peer went quiet) waits on
// the poller until a wait there is short again. Set Block only when
// nothing else of the connection can happen before data arrives.
// (Measured without the conversation rule: a blocknode serving `drive
// connect`'s four upstream connections lost a P to each wait and ran
// their writes at two thirds of the speed; with one P, `drive connect`
// serving four busy connections ran at half its speed.)
package kwait

import (
	"io"
	"net"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// MaxWait bounds one blocked wait: a few loopback round trips of a busy
// peer. Past it the reader parks on the poller, so an idle connection
// holds no thread, and a Close or a read deadline (which do not end a
// ppoll) takes effect within it.
const MaxWait = 200 * time.Microsecond

// Busy is how long a conversation counts as busy after it last had data:
// longer than the gaps between the requests of a client at queue depth 1
// behind two hops (a few hundred µs).
const Busy = 2 * time.Millisecond

// MaxConversations is the most open conversations with which a process
// still waits in the kernel: beyond it, it is a busy server whose
// connections' waits would take each other's Ps.
const MaxConversations = 8

var (
	// waiters counts the threads blocked in a kernel wait in this process.
	waiters atomic.Int32
	// waits counts the kernel waits made, for tests.
	waits atomic.Uint64

	// convs lists the open conversations (copied on change, read without
	// a lock); convMu serialises the changes.
	convMu sync.Mutex
	convs  atomic.Pointer[[]*Reader]
)

// Reader is an io.Reader over a socket whose reads wait in the kernel
// while Block is set. One goroutine at a time reads through it.
type Reader struct {
	nc io.Reader
	rc syscall.RawConn
	// Block is set by the connection's one reader when a wait for data
	// would otherwise park it with nothing else of the connection going
	// on.
	Block bool

	// The read in progress, kept here so that the callback given to the
	// raw connection is made once (a closure per read would allocate).
	fn     func(fd uintptr) bool
	p      []byte
	n      int
	err    error
	waited bool
	parked time.Time // when the read in progress parked on the poller
	// quiet is set when a wait for data took MaxWait or longer: the peer
	// is not answering quickly, so reads wait on the poller until one of
	// those waits is shorter.
	quiet bool

	conv     bool         // an open conversation, in convs
	lastData atomic.Int64 // unix nanoseconds of its last read with data
}

// NewReader returns a reader over nc that can wait in the kernel, or nil
// where it cannot: nc is not a plain TCP or unix socket (TLS buffers
// records of its own, so a readable socket says nothing), or this is not
// Linux. A server's connection is a conversation: it counts as one until
// Close (a client's connection serves the process's own requests and
// does not count).
func NewReader(nc net.Conn, conversation bool) *Reader {
	if !supported {
		return nil
	}
	var sc syscall.Conn
	switch c := nc.(type) {
	case *net.TCPConn:
		sc = c
	case *net.UnixConn:
		sc = c
	default:
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	k := &Reader{nc: nc, rc: rc, conv: conversation}
	k.fn = k.read
	if conversation {
		k.lastData.Store(time.Now().UnixNano())
		convMu.Lock()
		var list []*Reader
		if l := convs.Load(); l != nil {
			list = slices.Clone(*l)
		}
		list = append(list, k)
		convs.Store(&list)
		convMu.Unlock()
	}
	return k
}

// Close stops counting the reader as a conversation; the connection is the
// caller's to close. It may be called more than once.
func (k *Reader) Close() {
	if !k.conv {
		return
	}
	convMu.Lock()
	defer convMu.Unlock()
	if k.conv {
		list := slices.DeleteFunc(slices.Clone(*convs.Load()), func(r *Reader) bool { return r == k })
		convs.Store(&list)
		k.conv = false
	}
}

// Read reads into p. Without Block it is the connection's own Read. With
// Block, a read that finds no data waits in the kernel if it may, and
// otherwise (or after MaxWait) on the poller, as the connection's
// Read does; errors are the connection's.
func (k *Reader) Read(p []byte) (int, error) {
	if !k.Block || len(p) == 0 {
		n, err := k.nc.Read(p)
		if n > 0 && k.conv {
			k.lastData.Store(time.Now().UnixNano())
		}
		return n, err
	}
	k.p, k.waited = p, false
	cerr := k.rc.Read(k.fn)
	now := time.Now()
	if !k.parked.IsZero() {
		k.quiet = now.Sub(k.parked) >= MaxWait
		k.parked = time.Time{}
	}
	n, err := k.n, k.err
	k.p, k.n, k.err = nil, 0, nil
	switch {
	case cerr != nil:
		return 0, &net.OpError{Op: "read", Err: cerr}
	case err != nil:
		return 0, &net.OpError{Op: "read", Err: err}
	case n == 0:
		return 0, io.EOF
	}
	if k.conv {
		k.lastData.Store(now.UnixNano())
	}
	return n, nil
}

// read is the raw connection's callback: it reports false to park on the
// poller until the socket is readable, and is then called again.
func (k *Reader) read(fd uintptr) bool {
	k.n, k.err = readFD(fd, k.p)
	if k.err != syscall.EAGAIN {
		return true
	}
	if !k.waited && !k.quiet && k.mayWait() {
		k.waited = true
		ready := waitReadable(fd, MaxWait)
		waiters.Add(-1)
		if ready {
			k.n, k.err = readFD(fd, k.p)
			return k.err != syscall.EAGAIN
		}
		k.quiet = true
	}
	if k.parked.IsZero() && !k.waited {
		k.parked = time.Now()
	}
	return false
}

// disabled turns kernel waits off (RACKPOOL_KWAIT=off), for measuring
// them against the poller.
var disabled = os.Getenv("RACKPOOL_KWAIT") == "off"

// mayWait counts a kernel wait of k in, if no other conversation is busy
// (for a client's reader: at most one is), at most MaxConversations are
// open, and fewer than GOMAXPROCS-1 (at least one) kernel waits are going
// on.
func (k *Reader) mayWait() bool {
	if disabled {
		return false
	}
	if l := convs.Load(); l != nil {
		if len(*l) > MaxConversations {
			return false
		}
		// A client's reader serves one of the conversations, the busy
		// one if any: a conversation's reader is alone if no other is.
		busy := 0
		if !k.conv {
			busy = -1
		}
		since := time.Now().UnixNano() - int64(Busy)
		for _, r := range *l {
			if r == k || r.lastData.Load() <= since {
				continue
			}
			if busy++; busy > 0 {
				return false
			}
		}
	}
	limit := max(int32(runtime.GOMAXPROCS(0))-1, 1)
	for {
		n := waiters.Load()
		if n >= limit {
			return false
		}
		if waiters.CompareAndSwap(n, n+1) {
			waits.Add(1)
			return true
		}
	}
}
