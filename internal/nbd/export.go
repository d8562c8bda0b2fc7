package nbd

import (
	"context"
	"errors"
)

// ExportFlags are the features an export offers; the server advertises
// them as transmission flags (NBD_FLAG_HAS_FLAGS is always set).
type ExportFlags struct {
	ReadOnly       bool // NBD_FLAG_READ_ONLY: writes, trims and zeroes fail with EPERM
	CanFlush       bool // NBD_FLAG_SEND_FLUSH
	CanFUA         bool // NBD_FLAG_SEND_FUA
	CanTrim        bool // NBD_FLAG_SEND_TRIM
	CanWriteZeroes bool // NBD_FLAG_SEND_WRITE_ZEROES
	CanFastZero    bool // NBD_FLAG_SEND_FAST_ZERO (only with CanWriteZeroes)
	CanMultiConn   bool // NBD_FLAG_CAN_MULTI_CONN: a flush on one connection covers writes completed on all
	// CanBlockStatus means the export answers BlockStatus. A server still
	// negotiates base:allocation for an export without it, and answers
	// each query with one allocated run of the requested length without
	// calling BlockStatus. On a Client it reports that base:allocation
	// was negotiated.
	CanBlockStatus bool
}

// ZeroFlags qualify Export.Zero.
type ZeroFlags struct {
	// NoHole asks that the range stay allocated (NBD_CMD_FLAG_NO_HOLE);
	// without it the export may punch a hole.
	NoHole bool
	// Fast asks the export to fail with an error wrapping ErrNotSupported,
	// changing nothing, unless zeroing is faster than writing zeroes
	// (NBD_CMD_FLAG_FAST_ZERO).
	Fast bool
	// FUA asks that the zeroes be durable before Zero returns.
	FUA bool
}

// Extent is one run of the base:allocation metadata context.
type Extent struct {
	Length uint64
	Hole   bool // NBD_STATE_HOLE: not allocated; writes to it may fail with ENOSPC
	Zero   bool // NBD_STATE_ZERO: reads as zeroes
}

// Export is one client connection's handle on an exported device. The
// server calls its methods from many goroutines at once, with ranges it
// has checked against Size (off+length <= Size, length > 0) and, for
// ReadAt and WriteAt, lengths of at most Server.MaxPayload. The context
// is cancelled when the connection ends; a method may block (for example
// to retry on a remote), and should return soon after ctx ends.
//
// Errors are sent to the client as NBD error values (see [Errno]): wrap
// ErrPermission when the export was revoked, ErrNotSupported for a fast
// zero that would be slow, ErrNoSpace when out of space. The error's
// text is sent too when it wraps one of this package's sentinels, so
// keep such texts short and free of internals; other errors go out with
// a generic text and are logged.
//
// An export may also have a method Description() string, whose result is
// sent for NBD_INFO_DESCRIPTION.
type Export interface {
	// Size is the export's size in bytes; it must not change while the
	// export is open.
	Size() uint64
	// Flags are the features the export offers.
	Flags() ExportFlags
	// ReadAt fills p from offset off.
	ReadAt(ctx context.Context, p []byte, off uint64) error
	// WriteAt writes p at offset off, durably before returning if fua.
	// p is valid only until WriteAt returns.
	WriteAt(ctx context.Context, p []byte, off uint64, fua bool) error
	// Flush makes every write that completed before it durable.
	Flush(ctx context.Context) error
	// Trim discards the range (a hint: doing nothing is allowed).
	Trim(ctx context.Context, off, length uint64, fua bool) error
	// Zero makes the range read as zeroes.
	Zero(ctx context.Context, off, length uint64, f ZeroFlags) error
	// BlockStatus describes the allocation of consecutive runs from off.
	// The runs may cover less than length (at least one byte) or more
	// (the server cuts them to the range).
	BlockStatus(ctx context.Context, off, length uint64) ([]Extent, error)
	// Close releases the export. The server calls it once, after the
	// last request on the connection finished.
	Close() error
}

// InlineExport is an optional interface of an Export whose methods are
// quick and local and never wait for another request: a file or a local
// disk. When Inline reports true, the server runs a request on the
// connection's reading goroutine whenever no other request is already
// buffered behind it, instead of handing it to a goroutine of its own.
// That saves a goroutine hand-off and a thread wake-up per request, the
// bulk of the server's own cost at queue depth 1 and for large writes;
// requests that arrive meanwhile wait in the socket until it is done.
// An export that may block for long, such as one forwarding to a remote
// server, must not report true: its requests would then queue behind
// each other instead of running concurrently.
type InlineExport interface {
	Export
	Inline() bool
}

// IdleInlineExport is an optional interface of an Export that forwards
// requests elsewhere (and so must not be an InlineExport) but is mostly
// used one request at a time. When InlineWhenIdle reports true, the
// server runs a request on the reading goroutine when it is the
// connection's only request: none other in flight, none buffered. At
// queue depth 1 that saves the hand-off and thread wake-up per request;
// a request that arrives during the round trip waits for it, once, and
// then finds the connection busy and runs on a goroutine of its own.
type IdleInlineExport interface {
	Export
	InlineWhenIdle() bool
}

// ErrNotInline is what a method of an IdleInlineExport returns, before it
// has changed anything, when it finds it must wait long (for a failover,
// say) while running inline (RunsInline). The server then runs the
// request again on a worker goroutine and goes back to reading the
// connection: it serves the requests behind it, and it notices a client
// that hangs up, which ends the context the request runs with.
var ErrNotInline = errors.New("nbd: request must not run inline")

type inlineKey struct{}

// RunsInline reports whether an export method was called on the server's
// reading goroutine (ctx is the one the method got).
func RunsInline(ctx context.Context) bool {
	v, _ := ctx.Value(inlineKey{}).(bool)
	return v
}

// ExportInfo names an export in a list.
type ExportInfo struct {
	Name        string
	Description string
}

// Exports is the set of exports a Server offers.
type Exports interface {
	// Open returns the export called name for one connection (for
	// NBD_OPT_GO and NBD_OPT_EXPORT_NAME) or one query (NBD_OPT_INFO);
	// the server closes every export it opened. Errors wrapping
	// ErrUnknownExport are sent as NBD_REP_ERR_UNKNOWN and those wrapping
	// ErrPolicy as NBD_REP_ERR_POLICY, with the error's text; any other
	// error is logged and sent as NBD_REP_ERR_UNKNOWN with a generic text.
	Open(ctx context.Context, name string) (Export, error)
	// List returns the exports to show for NBD_OPT_LIST. An error
	// wrapping ErrPolicy or ErrNotSupported refuses the listing
	// (NBD_REP_ERR_POLICY, NBD_REP_ERR_UNSUP); any other is logged and
	// sent as NBD_REP_ERR_POLICY.
	List(ctx context.Context) ([]ExportInfo, error)
}
