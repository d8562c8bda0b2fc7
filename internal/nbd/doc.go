// Package nbd is the pooled-drive data plane: a Network Block Device
// server that exports devices through the [Export] interface, an export
// of files and block devices ([FileExport]), and a pipelining client
// ([Client]). It speaks the protocol of the NBD project's proto.md with
// fixed newstyle negotiation, structured replies, the base:allocation
// metadata context and TLS (NBD_OPT_STARTTLS), and interoperates with the
// Linux kernel client, qemu, libnbd (nbdinfo, nbdcopy, fio's nbd engine)
// and nbdkit, over TLS too.
//
// # Design
//
// The server runs one reader goroutine per connection. It reads request
// headers through a 64 KiB buffer, so that pipelined requests cost one
// read between them, and WRITE payloads into pooled buffers, straight
// from the socket for large ones (after a large WRITE the next header is
// read on its own, so its payload does not pass through the buffer).
// Each request that reaches the export runs on a worker goroutine of
// its connection (a new one when none is idle; idle ones wait for the
// next request until the connection ends, so their grown stacks serve
// again), so requests are served concurrently and answered in the order they
// complete, each reply tagged with the request's cookie. An export that
// implements [InlineExport] (FileExport does) has a request run on the
// reader goroutine instead whenever no other request is buffered behind
// it: at queue depth 1, and for large writes, that saves the goroutine
// hand-off and thread wake-up that otherwise cost as much as the
// system calls. An export that forwards elsewhere implements
// [IdleInlineExport] instead (the host side of a pooled drive does): a
// request runs on the reader only when it is the connection's sole one,
// so queue depth 1 saves the hand-off while deeper queues stay
// concurrent; a request that finds it must wait long returns
// [ErrNotInline] and runs again on a worker, so that the reader goes back
// to reading (and notices a client that hangs up). At most Server.MaxInFlight requests (default 64),
// holding at most 64 MiB of payload between them, are in flight per
// connection: at the limit the reader stops reading, so a fast client
// meets TCP backpressure, not an unbounded queue. Replies are queued
// under a mutex; the goroutine that finds no writer active writes the
// whole queue, and whatever is queued meanwhile, with one writev per
// batch (headers and READ data from the pooled buffers, never copied),
// and then frees the buffers. Nothing on the request path allocates
// beyond a goroutine once the pools are warm.
//
// The export's methods get a context that ends with the connection:
// after NBD_CMD_DISC once every request in flight has been answered (the
// protocol asks the server to finish them), at once when the client
// hangs up, the stream breaks or Server.Close runs. Export.Close is
// called once, after the last request finished.
//
// The client queues the headers of requests without data; the caller
// that finds nobody writing (after yielding once when others are in
// flight, so that the callers of a burst queue theirs) writes them all in one write, and what is queued
// meanwhile in the next. A WRITE takes the writer role, waiting for it,
// and sends the queued headers, its header and its data in one writev,
// so its caller's buffer is never referred to once the call returns.
// Replies are read by the holder of the reader role, which matches them
// to callers by cookie and reads READ data straight into the caller's
// buffer: a caller whose call is the only one in flight reads its own
// reply (no hand-off between goroutines at queue depth 1), waiting for it
// blocked in the kernel (internal/kwait); with more in flight a reader
// goroutine runs until none is, so that bulk replies are read as they
// come. A caller whose context ends returns ctx.Err() at once, giving the
// role up if it held it between replies; the late reply is read and
// dropped. The one wait is
// for reply data already being read into the caller's buffer, which is
// read to its end first (or the connection is broken after 2 s), so that
// nothing writes to the buffer after the call returned. The server's
// reader of an inline export waits for the next request the same way
// while no request is in flight. A request write
// still blocked a second after its caller's context ended (the server is
// not reading) is interrupted: if none of it went out, the call returns
// ctx.Err() and the connection goes on, the other callers' headers that
// were in the batch going back to the queue for a background writer; if
// part of it went out the connection fails, since half a request cannot
// be taken back. A writer hands the queue to a background writer after 8
// batches too, so that no caller is kept writing others' requests. ReadAt and WriteAt split
// requests longer than the server's maximum block size (or 32 MiB) and
// keep up to 16 of the pieces in flight. When the connection breaks,
// every call in flight and every later call fails with an error wrapping
// ErrClosed and the cause; a refusal by the server is an [*Error]
// instead, which matches the sentinels (ErrPermission for NBD_EPERM,
// ErrNotSupported for NBD_ENOTSUP, ...) with errors.Is.
//
// # Negotiation
//
// All integers are big-endian. The server greets with
//
//	"NBDMAGIC" (0x4e42444d41474943)  "IHAVEOPT" (0x49484156454F5054)
//	handshake flags (16 bits): FIXED_NEWSTYLE (1) | NO_ZEROES (2)
//
// and the client answers with its flags (32 bits). Only fixed newstyle is
// served: a client without FIXED_NEWSTYLE, or with a flag the server did
// not offer, is dropped (oldstyle and plain newstyle clients are long
// gone). Then options follow, each
//
//	"IHAVEOPT"  option (32 bits)  length (32 bits)  data
//
// answered (except EXPORT_NAME) by one or more replies
//
//	0x3e889045565a9 (64 bits)  option (32 bits)  type (32 bits)
//	length (32 bits)  data
//
// The options served:
//
//	1 EXPORT_NAME     enters transmission: size (64), flags (16), and 124
//	                  zero bytes unless NO_ZEROES. A refused export ends
//	                  the session: this option has no error reply.
//	2 ABORT           ACK, then the server closes.
//	3 LIST            one SERVER reply (name length, name, description)
//	                  per export, then ACK.
//	5 STARTTLS        no data (else ERR_INVALID). Without Server.TLSConfig
//	                  ERR_UNSUP; with it ACK, then the TLS handshake (see
//	                  TLS); once TLS is on, ERR_INVALID.
//	6 INFO, 7 GO      name length (32), name, count (16), info requests
//	                  (16 each). Replies INFO: EXPORT (size, flags) and
//	                  BLOCK_SIZE (minimum 1, preferred 4096, maximum
//	                  MaxPayload) always, NAME and DESCRIPTION when
//	                  asked; then ACK, and GO enters transmission. Open
//	                  errors: ERR_UNKNOWN or ERR_POLICY (see [Exports]).
//	8 STRUCTURED_REPLY ACK; replies in transmission are then structured.
//	9 LIST_META_CONTEXT, 10 SET_META_CONTEXT
//	                  export name length (32), name, query count (32),
//	                  queries (length (32), string). Need structured
//	                  replies first (else ERR_INVALID). base:allocation is
//	                  the only context, with ID 1 when set; "base:" lists
//	                  it; other queries select nothing. SET replaces the
//	                  selection, which applies if GO names the same export.
//	others            ERR_UNSUP.
//
// Option data longer than 64 KiB is answered ERR_TOO_BIG and skipped;
// longer than 1 MiB (deemed a denial of service, which the protocol lets
// the server drop) it is answered and the client dropped, as is an
// oversized EXPORT_NAME, which cannot be answered. Malformed data (lengths
// that do not add up, names over 4096 bytes, not UTF-8 or with NUL, data
// on options that take none) is answered ERR_INVALID. The whole
// negotiation must end within Server.HandshakeTimeout (10 s).
//
// # TLS
//
// A server with TLSConfig runs the protocol's FORCEDTLS mode, as nbdkit
// --tls=require and qemu-nbd --tls-creds do: until NBD_OPT_STARTTLS
// succeeds, every option but STARTTLS and ABORT is answered
// NBD_REP_ERR_TLS_REQD (an oversized one too, its data skipped), and
// NBD_OPT_EXPORT_NAME, which has no error reply, drops the client, so no
// export is opened or listed in plain text. STARTTLS is answered ACK and
// the server runs the TLS handshake on the raw connection. Bytes that
// arrived after the STARTTLS option, before the ACK was sent, drop the
// client unanswered: taking plain text for what follows the upgrade is
// the STARTTLS injection of CVE-2011-0411, and a client must wait for the
// ACK. After the handshake the negotiation goes on inside TLS with no
// state of the options before it (structured replies and the meta context
// selection are forgotten, as the protocol asks). A failed handshake ends
// the session and is logged with its reason (a client without a
// certificate, a certificate of another CA). The handshake counts against
// HandshakeTimeout. Whether clients must present certificates is
// TLSConfig's ClientAuth; [ServerTLSConfig] with verifyPeer requires ones
// that chain to the directory's CA (nbdkit's --tls-verify-peer).
//
// A [Dialer] with a TLSConfig sends STARTTLS as its first option, as the
// protocol advises a client that wants TLS, and fails with
// ErrTLSNotOffered if the server refuses it or does not negotiate
// options: no fallback to plain text, which would let a man in the middle
// downgrade the session (an nbds:// URI). It verifies the server's
// certificate for the host dialled (localhost on a unix socket) unless
// the configuration names another. A plain client of a TLS server fails
// at its first option with ErrTLSRequired. TLS 1.2 is the minimum; Go's
// crypto/tls chooses the suite (TLS 1.3 AES-GCM on machines with AES
// instructions).
//
// crypto/tls has no writev: every Write is at least one record and one
// system call. Both sides therefore gather a batch's headers and small
// payloads into writes of up to 64 KiB (four full records, dynamic record
// sizing off), and a piece of 64 KiB or more at the head of a write goes
// out as it is. A TLS write cannot be taken back once interrupted
// (crypto/tls fails every later write, and part of a record may have
// gone out), so the client's interrupted writes break a TLS connection
// instead of handing the queue to another writer. Closing sends
// close_notify unless the peer has not read it within 100 ms (a full
// socket buffer), so a hung peer costs no more to close than a dead one.
//
// [ServerTLSConfig] and [ClientTLSConfig] read the x509 directory layout
// that nbdkit --tls-certificates, qemu's tls-creds-x509 and libnbd's
// tls-certificates share (ca-cert.pem, server-cert.pem, server-key.pem,
// client-cert.pem, client-key.pem); a server re-reads its pair at the
// next handshake after the files change.
//
// # Transmission
//
// Request (28 bytes, then length bytes of data for WRITE):
//
//	0x25609513 (32)  command flags (16)  type (16)  cookie (64)
//	offset (64)  length (32)
//
// Simple reply (16 bytes, then READ data on success), the only kind
// unless structured replies were negotiated:
//
//	0x67446698 (32)  error (32)  cookie (64)
//
// Structured reply chunk (20 bytes, then length bytes of payload):
//
//	0x668e33ef (32)  flags (16): DONE (1)  type (16)  cookie (64)
//	length (32)
//
// With structured replies the server answers a READ with one OFFSET_DATA
// chunk (1: offset (64), data) marked DONE, so it also offers "don't
// fragment" (SEND_DF); BLOCK_STATUS with one BLOCK_STATUS chunk (5:
// context ID (32), then length (32) and flags (32) per run: HOLE 1,
// ZERO 2); errors with one ERROR chunk (0x8001: error (32), message
// length (16), message); and other successes with a simple reply. The
// client also takes OFFSET_HOLE (2), ERROR_OFFSET (0x8002), NONE (0) and
// replies spread over several chunks, in any order and interleaved.
//
// Commands: READ 0, WRITE 1, DISC 2, FLUSH 3, TRIM 4, CACHE 5 (accepted
// as a no-op and not advertised), WRITE_ZEROES 6 (flags NO_HOLE 2,
// FAST_ZERO 16), BLOCK_STATUS 7 (flag REQ_ONE 8; only once base:allocation
// was negotiated). FUA (1) is taken on every command when the export
// offers it, DF (4) on READ with structured replies. The transmission
// flags are HAS_FLAGS always, and READ_ONLY, SEND_FLUSH, SEND_FUA,
// SEND_TRIM, SEND_WRITE_ZEROES, SEND_FAST_ZERO and CAN_MULTI_CONN as the
// export's [ExportFlags] say. A BLOCK_STATUS reply never reaches past the
// request, has at most 131072 runs, and at least one: an export that
// cannot tell reports the range allocated (status 0), which the protocol
// allows.
//
// # Errors and decisions
//
// The server checks, in order, and answers with the error value:
//
//	WRITE longer than MaxPayload (before its payload)     EOVERFLOW (75)
//	unknown command, flag not valid for the command or not offered,
//	command not offered (FLUSH, TRIM, WRITE_ZEROES, BLOCK_STATUS),
//	FLUSH with non-zero offset or length                  EINVAL (22)
//	READ longer than MaxPayload                           EOVERFLOW (75)
//	WRITE, TRIM or WRITE_ZEROES on a read-only export     EPERM (1)
//	offset+length past the end (or overflowing) on WRITE
//	or WRITE_ZEROES                                       ENOSPC (28)
//	the same on READ, TRIM, CACHE, BLOCK_STATUS           EINVAL (22)
//	BLOCK_STATUS of zero bytes                            EINVAL (22)
//
// Other zero-length requests succeed without calling the export (the
// protocol leaves them unspecified but asks servers not to disconnect).
// TRIM and WRITE_ZEROES may be longer than MaxPayload: they carry no
// payload. Export errors map through [Errno]: ErrPermission and EPERM to
// EPERM (a revoked export), ErrNoSpace, ENOSPC, EDQUOT and EFBIG to
// ENOSPC, ErrNotSupported to ENOTSUP (a fast zero that is not fast),
// ErrInvalid to EINVAL, an [*Error] relayed from another server to its
// own value, anything else to EIO. The text of an error wrapping a
// sentinel of this package is sent with it; other errors are logged and
// sent with a generic text, so paths and internals stay on the server.
// A panic in an export is logged and answered EIO.
//
// An oversized WRITE (length over MaxPayload) still has its payload on
// the wire. The protocol lets the server drop a client whose payload is
// large enough to be deemed a denial of service, and asks it not to deem
// so anything under 32 MiB. The server reads and throws away payloads
// of up to max(2×MaxPayload, 64 MiB) through its buffered reader
// (no memory is allocated by the announced length) and answers EOVERFLOW,
// so the connection stays usable; a longer one is answered EOVERFLOW and
// the connection dropped, since skipping gigabytes would only serve an
// attacker.
//
// A request with a bad magic number ends the connection (logged as a
// warning): after it the stream cannot be framed. So does a stream that ends inside a
// header or a payload; a clean end between requests without NBD_CMD_DISC
// is a hard disconnect and cancels the requests in flight.
//
// # FileExport
//
// Reads and writes are pread and pwrite at the requested offsets. FLUSH
// is fdatasync. A FUA write is one pwritev2 with RWF_DSYNC (falling back
// to pwrite and fdatasync); FUA on TRIM and WRITE_ZEROES is fdatasync
// after. TRIM punches a hole (fallocate PUNCH_HOLE|KEEP_SIZE) or, where
// holes cannot be punched, does nothing (trim is a hint). WRITE_ZEROES
// punches a hole unless NO_HOLE, else uses fallocate ZERO_RANGE; where
// the file system has neither it writes zeroes, or, with FAST_ZERO,
// fails with ENOTSUP having changed nothing. Block status comes from
// lseek SEEK_DATA and SEEK_HOLE (holes read as zeroes: HOLE|ZERO); block
// devices, whose allocation lseek cannot see, report everything
// allocated. The size is taken when the export is opened (the end of a
// block device); a read-only export is opened O_RDONLY.
//
// CAN_MULTI_CONN is advertised because it holds: every connection to a
// file opens its own descriptor of the same inode, writes go to the one
// page cache the kernel keeps per inode, so a read on any connection sees
// every completed write, and fdatasync on any descriptor writes back all
// of the inode's dirty pages, so a FLUSH (or FUA) answered on one
// connection covers the writes completed on all of them, as the flag
// promises.
//
// # Not implemented
//
// TLS by pre-shared keys (nbdkit --tls-psk) and the SELECTIVETLS mode
// (TLS at the client's choice, nbdkit --tls=on: a server with TLS
// requires it), extended headers (NBD_OPT_EXTENDED_HEADERS, 64-bit
// lengths), the RESIZE extension and any resizing (the size is fixed
// when an export is opened), metadata contexts other than
// base:allocation, OFFSET_HOLE chunks in the server's READ replies (reads
// always carry data), NBD_INFO_BLOCK_SIZE requirements stricter than the
// defaults, and oldstyle or non-fixed newstyle negotiation on the server.
// The client does not align requests to a server's minimum block size; it
// sends them as given.
package nbd
