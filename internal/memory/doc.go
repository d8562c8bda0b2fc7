// Package memory is the pooled-memory data plane: the memnode server, which
// holds a large byte capacity and serves leased regions of it over a binary
// TCP protocol, and the Go client that reads and writes those regions.
//
// # Design
//
// The control plane grants leases on byte ranges of a memnode's capacity and
// hands the lease holder a capability token (see [Key.Sign]). The token names
// the lease, the node, the region (offset and length within the node's
// capacity), the rights and an expiry, and is MACed with HMAC-SHA256 under a
// key the control plane shares with the memnode. The memnode checks tokens
// locally, without calling the control plane, as in the LWFS capability
// design: a connection presents a token once (AUTH) and every later request
// on that connection is checked against the token's claims: expiry against
// the server clock, revocation ([Server.Revoke]), rights, and range. Offsets
// in requests are relative to the region start, so a client never learns or
// names another lease's memory.
//
// The capacity is anonymous memory that takes no RSS until a page is
// touched: an mmap with MAP_NORESERVE on Linux, whose pages ZERO hands back
// with MADV_DONTNEED; race-detector builds and other systems use one large
// Go heap allocation instead, so that the detector sees every access to the
// capacity. Concurrent accesses are
// serialised by a fixed table of reader/writer locks striped over 64 KiB
// chunks of the capacity; a request takes the locks of every stripe it
// covers in ascending order, so each READ is a consistent snapshot and each
// WRITE or APPEND lands whole with respect to other requests. A per-lease
// reader/writer lock orders ZERO after every request of that lease already
// being served. Each lease also has an append head, kept by the server,
// starting at 0 and reset by ZERO.
//
// The server runs one goroutine per connection that reads requests through
// a buffered reader and serves them inline from memory. Responses are
// assembled in a per-connection buffer and sent with one write when no
// further complete request is already buffered, so pipelined requests are
// answered in batches. READ data is copied into that buffer under the stripe
// read locks rather than handed to writev straight from the capacity: that
// keeps locks off network I/O and the race detector able to see every
// access, for one memory copy. Nothing on the path allocates once the
// per-connection buffers have grown; they grow to the largest request the
// connection has made (at most the frame limit) and stay that size.
//
// The client is safe for concurrent use. Each request carries a tag and
// responses are matched to callers by tag. Callers write their own requests
// to the socket with vectored writes (the payload slices of WRITE and APPEND
// go to writev as they are, never concatenated); a caller that finds another
// already writing queues its frame, and the writer sends the whole queue in
// one writev before it goes on to wait. There is no reader goroutine:
// whichever waiting caller holds the reader role reads responses, copying
// each into its caller's buffer (READ data goes into the caller's p; only
// the part that arrived in the same read as its header passes through the
// 32 KiB read buffer), and passes the role to another waiting caller once
// its own response is in. A lone caller so reads its own response with no
// goroutine switch, which is what keeps a 4 KiB READ close to a raw TCP
// round trip; handing responses over from a reader goroutine cost about as
// much again. If the only responses due are ones whose callers gave up, a
// short-lived goroutine drains them so the server never blocks on a full
// socket.
//
// A caller whose context ends returns ctx.Err() at once, with two bounded
// exceptions: a response already being read into its buffer is read to its
// end first, and a frame being written from its buffers is written to its
// end first. A write that stays blocked on a full socket after the writing
// caller's context ends fails the connection, since a partly written frame
// cannot be taken back. A request abandoned after it was sent may still take
// effect on the server; its late response is skipped by tag. Waiting with a
// cancellable context costs no allocation unless the wait outlasts a short
// probe (100µs), after which a context.AfterFunc watches the context.
//
// # Wire protocol
//
// All integers are big-endian. A connection is a stream of request frames
// from the client and response frames from the server. Requests are served
// in order, but a client must match responses by tag.
//
// Request frame (24-byte header, then Length bytes of payload):
//
//	 0      1      2             4                     8
//	+------+------+-------------+---------------------+
//	| ver  | op   | flags       | tag                 |
//	+------+------+-------------+---------------------+
//	| offset (uint64)                                 |  8
//	+-------------------------+-----------------------+
//	| count (uint32)          | length (uint32)       | 16
//	+-------------------------+-----------------------+
//	| payload (length bytes) ...                        24
//
//	ver     0xA1: the high nibble marks this protocol, the low nibble is
//	        version 1. Any other value closes the connection.
//	op      opcode, below.
//	flags   reserved, must be 0.
//	tag     chosen by the client, echoed in the response.
//	offset  READ, WRITE: byte offset within the region.
//	        ZERO: the lease expiry, Unix nanoseconds (signed).
//	        Otherwise 0.
//	count   READ: number of bytes to read. Otherwise 0.
//	length  payload length; a request whose length exceeds the server's
//	        frame limit is answered TooLarge and the connection closed.
//
// Opcodes and their payloads:
//
//	1 AUTH    payload: the token text. Replaces the connection's claims
//	          if the token verifies; a refused AUTH leaves them as they were.
//	2 READ    no payload; reads count bytes at offset. Needs read rights.
//	3 WRITE   payload: the data, written at offset. Needs write rights.
//	4 APPEND  payload: the data, written at the lease's append head, which
//	          moves past it. Needs write rights.
//	5 STAT    no payload. Needs a valid token, no particular right.
//	6 ZERO    no payload. Needs admin rights. Revokes the lease until the
//	          expiry in offset, zeroes the region and resets the append head.
//	7 PING    no payload; needs no AUTH.
//	8 MAP     no payload, offset and count 0. Needs read rights and the
//	          node's unix socket (over TCP it is ErrProtocol). The answer
//	          carries, as SCM_RIGHTS ancillary data with its first byte, a
//	          descriptor of the lease's own backing object (read-only for
//	          a token without write rights); see Mapped leases below.
//
// Response frame (12-byte header, then Length bytes of payload):
//
//	 0                     4      5                    8
//	+---------------------+------+--------------------+
//	| tag                 |status| reserved (0)       |
//	+---------------------+------+--------------------+
//	| length (uint32)     | payload ...                 12
//	+---------------------+
//
// Payloads of successful responses (status 0):
//
//	AUTH    16 bytes: server epoch (uint64), frame limit (uint32), 0 (uint32)
//	READ    count bytes of data
//	APPEND  8 bytes: the region offset the data was written at
//	STAT    32 bytes: region size, append head, token expiry (Unix ns,
//	        signed), server epoch, each 64 bits
//	MAP     24 bytes: region size, token expiry (Unix ns, signed), server
//	        epoch, each 64 bits; plus the descriptor
//	others  empty
//
// A failed request gets a non-zero status and, as payload, a short UTF-8
// message of at most 256 bytes for people, never containing secrets. The
// client maps the status back to a sentinel error of this package:
//
//	1 ErrBadToken   2 ErrExpired    3 ErrRevoked   4 ErrWrongNode
//	5 ErrNoAuth     6 ErrRights     7 ErrRange     8 ErrNoSpace
//	9 ErrTooLarge  10 ErrProtocol
//
// A failed request changes nothing. Framing errors the server cannot
// recover from (a bad version byte, an oversized length) are answered and
// then the connection is closed; a truncated frame just closes it. A request
// with an unknown opcode, non-zero flags or a payload it does not take is
// answered ErrProtocol, an AUTH payload longer than any token ErrBadToken and
// a READ count over the frame limit ErrTooLarge, and the connection goes on.
// The server never allocates by a length read from the wire: a payload
// buffer grows only as payload bytes arrive, up to the frame limit.
//
// The epoch is a random number drawn when the server starts. A client that
// sees it change (for example on [Client.Renew]) knows the node restarted and
// the memory it had written is gone ([ErrNodeRestarted]).
//
// # Mapped leases
//
// A client on the node's own machine can map a lease instead of reading
// and writing it over TCP ([Map]): it connects to the node's unix socket,
// presents its token (AUTH) and sends MAP. The first MAP of a lease moves
// its region out of the shared capacity into a memory file of its own
// (memfd, sealed against resizing), which the server maps too; from then
// on every access to the region, TCP included, goes to that file, so both
// paths see the same bytes, and the holder reaches it with loads and
// stores (no stripe locks: concurrent stores to one address from two
// paths are the holders' business, as with any shared memory). When the
// lease is zeroed (reclaim), revoked, or its last token expires (checked
// every second), the server punches the whole file out and lets go of it:
// a holder that kept its mapping reads zeros, and its stores land in a file
// nobody else maps. The range's next lease gets a new file. A holder keeps
// its mapping past the first expiry by presenting the renewed token on the
// same socket ([Mapping.Renew]).
//
// This stands for CXL memory attached to the host: a DAX device or a
// CPU-less NUMA node handed out by dynamic-capacity extents, where the
// fabric's extent assignment gives the isolation the separate file gives
// here (docs/memory.md).
//
// # Tokens
//
// A token is base64url(payload) "." base64url(HMAC-SHA256(key, payload)),
// both without padding. The payload is:
//
//	version (1 byte, 1), rights (1 byte), offset (uint64), length (uint64),
//	expiry (int64 Unix ns), lease length (1 byte), lease, node length
//	(1 byte), node
//
// with big-endian integers and no trailing bytes.
package memory
