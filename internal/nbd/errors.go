package nbd

import (
	"errors"
	"fmt"
	"syscall"
)

// Errors an Exports implementation returns from Open; the server turns
// them into option replies.
var (
	// ErrUnknownExport means no export has the requested name
	// (NBD_REP_ERR_UNKNOWN).
	ErrUnknownExport = errors.New("nbd: unknown export")
	// ErrPolicy means the export exists but this client may not have it
	// (NBD_REP_ERR_POLICY).
	ErrPolicy = errors.New("nbd: refused by policy")
)

// Errors of requests. An Export returns errors wrapping them and the
// server sends the matching NBD error value ([Errno]); a Client returns an
// [*Error] that matches them with errors.Is.
var (
	// ErrPermission means the request is not allowed on this export: a
	// write to a read-only export, or an export whose ownership was
	// revoked (NBD_EPERM).
	ErrPermission = errors.New("nbd: operation not permitted")
	// ErrNotSupported means the export cannot do the request as asked: a
	// fast zero that would not be fast, or a command the export does not
	// offer (NBD_ENOTSUP).
	ErrNotSupported = errors.New("nbd: operation not supported")
	// ErrNoSpace means the backing store is full or the write reaches past
	// the end of the export (NBD_ENOSPC).
	ErrNoSpace = errors.New("nbd: no space left")
	// ErrInvalid means the request is malformed: out of range, unknown
	// command or flag (NBD_EINVAL).
	ErrInvalid = errors.New("nbd: invalid request")
	// ErrTooLarge means the request is longer than the server takes in
	// one request (NBD_EOVERFLOW).
	ErrTooLarge = errors.New("nbd: request too large")
	// ErrShutdown means the server is shutting down (NBD_ESHUTDOWN).
	ErrShutdown = errors.New("nbd: server shutting down")
	// ErrIO means the export failed to do the request (NBD_EIO).
	ErrIO = errors.New("nbd: input/output error")
)

// Errors of the connection.
var (
	// ErrClosed means the client's connection was closed or broke: every
	// call in flight when it broke and every later call returns an error
	// wrapping it, with the cause. Requests that got ErrClosed may or may
	// not have taken effect on the server.
	ErrClosed = errors.New("nbd: connection closed")
	// ErrProtocol means the peer broke the NBD protocol.
	ErrProtocol = errors.New("nbd: protocol error")
	// ErrTLSRequired means the server requires TLS and the client did not
	// negotiate it (NBD_REP_ERR_TLS_REQD): dial with a TLS configuration
	// (an nbds:// URI).
	ErrTLSRequired = errors.New("nbd: server requires TLS")
	// ErrTLSNotOffered means a client that requires TLS met a server that
	// does not offer it (NBD_OPT_STARTTLS refused, or no fixed newstyle
	// negotiation); the client never falls back to plain text.
	ErrTLSNotOffered = errors.New("nbd: server does not offer TLS")
)

// Error is an error value a server replied to a request, with the
// message it sent, if any.
type Error struct {
	Errno   uint32 // NBD error value: 1 EPERM, 5 EIO, 22 EINVAL, ...
	Message string // the server's text; may be empty
}

func (e *Error) Error() string {
	if e.Message == "" {
		return "nbd: server replied " + errnoName(e.Errno)
	}
	return "nbd: server replied " + errnoName(e.Errno) + ": " + e.Message
}

// Is reports whether the error value matches target, one of this
// package's request sentinels. Values the protocol does not define match
// ErrInvalid, as the protocol asks clients to treat them.
func (e *Error) Is(target error) bool {
	switch e.Errno {
	case errnoPerm:
		return target == ErrPermission
	case errnoIO:
		return target == ErrIO
	case errnoNoSpc:
		return target == ErrNoSpace
	case errnoOverflow:
		return target == ErrTooLarge
	case errnoNotSup:
		return target == ErrNotSupported
	case errnoShutdown:
		return target == ErrShutdown
	case errnoNoMem:
		return false
	default:
		return target == ErrInvalid
	}
}

// Errno returns the NBD error value a server sends for err: the value of
// an [*Error] (a reply relayed from another server), else the first of
// these that err matches with errors.Is:
//
//	ErrPermission, EPERM, EACCES, EROFS  1 NBD_EPERM
//	ErrIO, EIO                           5 NBD_EIO
//	ENOMEM                              12 NBD_ENOMEM
//	ErrInvalid, EINVAL                  22 NBD_EINVAL
//	ErrNoSpace, ENOSPC, EDQUOT, EFBIG   28 NBD_ENOSPC
//	ErrTooLarge, EOVERFLOW              75 NBD_EOVERFLOW
//	ErrNotSupported, ENOTSUP            95 NBD_ENOTSUP
//	ErrShutdown, ESHUTDOWN             108 NBD_ESHUTDOWN
//
// and NBD_EIO for anything else (nil gives 0).
func Errno(err error) uint32 {
	if err == nil {
		return 0
	}
	if e, ok := errors.AsType[*Error](err); ok {
		switch e.Errno {
		case errnoPerm, errnoIO, errnoNoMem, errnoInval, errnoNoSpc, errnoOverflow, errnoNotSup, errnoShutdown:
			return e.Errno
		}
		return errnoInval
	}
	for _, m := range errnoMap {
		for _, target := range m.errs {
			if errors.Is(err, target) {
				return m.errno
			}
		}
	}
	return errnoIO
}

var errnoMap = [...]struct {
	errno uint32
	errs  []error
}{
	{errnoPerm, []error{ErrPermission, syscall.EPERM, syscall.EACCES, syscall.EROFS}},
	{errnoIO, []error{ErrIO, syscall.EIO}},
	{errnoNoMem, []error{syscall.ENOMEM}},
	{errnoInval, []error{ErrInvalid, syscall.EINVAL}},
	{errnoNoSpc, []error{ErrNoSpace, syscall.ENOSPC, syscall.EDQUOT, syscall.EFBIG}},
	{errnoOverflow, []error{ErrTooLarge, syscall.EOVERFLOW}},
	{errnoNotSup, []error{ErrNotSupported, syscall.ENOTSUP}},
	{errnoShutdown, []error{ErrShutdown, syscall.ESHUTDOWN}},
}

// errnoName names an NBD error value.
func errnoName(errno uint32) string {
	switch errno {
	case errnoPerm:
		return "EPERM"
	case errnoIO:
		return "EIO"
	case errnoNoMem:
		return "ENOMEM"
	case errnoInval:
		return "EINVAL"
	case errnoNoSpc:
		return "ENOSPC"
	case errnoOverflow:
		return "EOVERFLOW"
	case errnoNotSup:
		return "ENOTSUP"
	case errnoShutdown:
		return "ESHUTDOWN"
	}
	return fmt.Sprintf("error %d", errno)
}

// errnoText is the message a server sends with an error value when the
// export's own error text is not fit to send (see replyMessage).
func errnoText(errno uint32) string {
	switch errno {
	case errnoPerm:
		return "operation not permitted"
	case errnoIO:
		return "input/output error"
	case errnoNoMem:
		return "out of memory"
	case errnoInval:
		return "invalid argument"
	case errnoNoSpc:
		return "no space left on device"
	case errnoOverflow:
		return "value too large"
	case errnoNotSup:
		return "operation not supported"
	case errnoShutdown:
		return "server shutting down"
	}
	return "error"
}

// sentinels are the errors whose wrappers carry text meant for the peer.
var sentinels = [...]error{
	ErrUnknownExport, ErrPolicy, ErrPermission, ErrNotSupported, ErrNoSpace,
	ErrInvalid, ErrTooLarge, ErrShutdown, ErrIO,
}

// peerMessage returns the text to send with an error reply: err's own
// message when err wraps one of this package's sentinels or an [*Error]
// (texts written for the peer), otherwise fallback, so that OS errors
// with paths and other internals stay in the server's log. The text is
// cut to maxMessage bytes on a UTF-8 boundary.
func peerMessage(err error, fallback string) string {
	msg := fallback
	if _, ok := errors.AsType[*Error](err); ok {
		msg = err.Error()
	} else {
		for _, s := range sentinels {
			if errors.Is(err, s) {
				msg = err.Error()
				break
			}
		}
	}
	return truncateUTF8(msg, maxMessage)
}

// truncateUTF8 cuts s to at most n bytes without splitting a rune.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}
