// Package pager gives a program a large region of virtual memory backed by
// pooled memory: P0 §4's second way of exposing a memory pool, as a paging
// device, and P3's swap to a remote device. The program uses the region as
// a []byte; pages it touches are brought in from a memnode lease on first
// touch, a bounded local budget of them stays resident, and cold pages are
// evicted back, dirty ones written to the memnode first.
//
// # How a page moves
//
// The region is a shared mapping of a memory file (memfd) registered with
// userfaultfd for missing-page and write-protect faults. A touch of a page
// that is not resident blocks the touching thread in the kernel and queues
// a fault message; the helper (below) reads it, fetches the aligned group
// of Options.Prefetch pages around the page from the memnode with one READ
// (pages never written back are zeros and are not fetched; while the
// budget has free frames, a fault among such pages brings in the whole
// aligned window of 64 around it), evicts enough pages to stay within the
// budget, and installs the group with UFFDIO_COPY, which wakes the thread.
//
// Dirty tracking has two forms. A page fetched over TCP goes in
// write-protected; the first write to it is a write-protect fault, which
// marks it dirty and makes it writable (a page whose own fault was a write
// goes in writable and dirty at once), so a clean page is dropped without
// a write. Zeros, and every page of a mapped lease (below), go in writable
// and count as possibly dirty: eviction reads them back and writes only
// those that changed, from zeros or from the pool's copy. Either way a
// page written back is one whose contents changed.
//
// Eviction is CLOCK over the budget's frames. Userspace cannot see the
// hardware accessed bit, so a page's reference bit is set by the events the
// pager sees, its fault and its first write; the hand clears it and passes
// the page over once. Victims that may be dirty are write-protected first
// (a write racing with the eviction then waits, it is not lost), read back
// from the memory file and written to the memnode in runs of adjacent
// pages, concurrently; then every victim is punched out of the memory file
// (fallocate PUNCH_HOLE), which unmaps it from the region and frees it,
// and threads that waited on it are woken to fault it in again.
//
// # A mapped lease
//
// With Options.MapSocket, the memnode is on this machine and hands the
// helper its lease as memory (memory.Map, P0 §4's byte-addressable way):
// a fault is a copy from the mapping and a writeback a copy into it, with
// no request to the memnode and no TCP. A lease the memnode discards
// (revoked, expired, node restarted) reads zeros through a mapping, so the
// helper keeps a 32-bit hash of every page it writes to the pool and
// checks each page it brings back: a page that comes back changed fails
// the pager, with the memnode's reason. The mapping also refuses an access
// after the token's expiry, and the helper asks the memnode every second
// whether the lease stands (a node that is gone, or a revocation no fault
// has met yet, fails the pager within that second).
//
// # The helper process, and why
//
// A thread that touches a missing page stops inside the kernel, and the Go
// runtime does not know: the goroutine still holds its P, and it cannot be
// preempted, because the preemption signal only restarts the fault. If the
// touch was in assembly (copy, which is memmove, hashing, crc32) the
// goroutine is not at an async safe point, so a stop-the-world (every GC
// cycle has two) waits for it, and a fault handler that is a goroutine in
// the same process is stopped too: the program deadlocks. A locked OS
// thread or spare GOMAXPROCS does not help with that, since a
// stop-the-world stops every goroutine. So faults are served by a helper
// process, the program's own executable started again (Open does it; the
// program calls IsHelper and RunHelper first thing in main), which holds a
// copy of the userfaultfd and of the memory file and its own connection to
// the memnode. It never waits for the program, so a fault is always served
// whatever the program's runtime is doing; the program's GC just waits for
// the fault, as for slow memory. Eviction works from the helper because the
// region is a shared file: the helper reads dirty pages with pread and
// drops pages with a hole punch, neither of which needs the program.
//
// # Failure
//
// Memory cannot return an error, so a failure is a fault. If the memnode
// refuses a request (lease expired or revoked, node restarted, connection
// lost) or does not answer within Options.IOTimeout, or the helper dies,
// the pager fails: the helper truncates the memory file to nothing, so
// that every access to the region raises SIGBUS, then sends its error to
// the program (so that a program that sees the failure can no longer
// reach a resident page) and wakes every thread waiting on a fault so
// that it takes it. Nothing reads zeros in place of lost data, and no thread stays
// blocked. Access runs a function with the region and turns such a fault
// into the pager's error (it uses debug.SetPanicOnFault); an access made
// outside Access after a failure crashes the program with the runtime's
// "unexpected fault address" report. Err and Failed tell a watcher.
//
// Close does the same with ErrClosed: the helper exits, the region becomes
// dead, waiting threads are woken (inside Access they get ErrClosed), and
// the region is unregistered and unmapped once no Access call is running.
//
// # Cost
//
// A fault costs two process switches, plus a memnode round trip over TCP
// or a copy from a mapped lease; see
// docs/paging.md for the measured slowdowns against an all-local slice and
// a swap file. On a real host the same service is a swap device or the
// kernel's far-memory path; docs/paging.md says when to use which.
package pager
