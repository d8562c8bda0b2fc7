package nbd

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
	"testing"
)

func TestErrno(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want uint32
	}{
		{nil, 0},
		{ErrPermission, errnoPerm},
		{fmt.Errorf("export revoked: %w", ErrPermission), errnoPerm},
		{&os.PathError{Op: "write", Path: "/x", Err: syscall.EPERM}, errnoPerm},
		{syscall.EROFS, errnoPerm},
		{syscall.EACCES, errnoPerm},
		{syscall.EIO, errnoIO},
		{syscall.ENOMEM, errnoNoMem},
		{ErrInvalid, errnoInval},
		{syscall.EINVAL, errnoInval},
		{ErrNoSpace, errnoNoSpc},
		{syscall.ENOSPC, errnoNoSpc},
		{syscall.EDQUOT, errnoNoSpc},
		{syscall.EFBIG, errnoNoSpc},
		{ErrTooLarge, errnoOverflow},
		{syscall.EOVERFLOW, errnoOverflow},
		{fmt.Errorf("slow: %w", ErrNotSupported), errnoNotSup},
		{syscall.ENOTSUP, errnoNotSup},
		{syscall.ESHUTDOWN, errnoShutdown},
		{ErrShutdown, errnoShutdown},
		{errors.New("anything"), errnoIO},
		{fs.ErrNotExist, errnoIO},
		{fmt.Errorf("relayed: %w", &Error{Errno: errnoNoSpc}), errnoNoSpc},
		{&Error{Errno: 1234}, errnoInval},
		{fmt.Errorf("%w: lost", ErrClosed), errnoIO},
	} {
		if got := Errno(tc.err); got != tc.want {
			t.Errorf("Errno(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}

func TestErrorIs(t *testing.T) {
	for _, tc := range []struct {
		errno uint32
		want  error
	}{
		{errnoPerm, ErrPermission}, {errnoIO, ErrIO}, {errnoInval, ErrInvalid}, {errnoNoSpc, ErrNoSpace},
		{errnoOverflow, ErrTooLarge}, {errnoNotSup, ErrNotSupported}, {errnoShutdown, ErrShutdown},
		{77, ErrInvalid},
	} {
		err := fmt.Errorf("wrapped: %w", &Error{Errno: tc.errno, Message: "m"})
		if !errors.Is(err, tc.want) {
			t.Errorf("Error{%d} does not match %v", tc.errno, tc.want)
		}
		if errors.Is(err, ErrClosed) || (tc.want != ErrPermission && errors.Is(err, ErrPermission)) {
			t.Errorf("Error{%d} matches a sentinel it should not", tc.errno)
		}
	}
}

func TestPeerMessage(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("export revoked: %w", ErrPermission), "export revoked: nbd: operation not permitted"},
		{&os.PathError{Op: "pread", Path: "/secret/path", Err: syscall.EIO}, "fallback"},
		{errors.New("internal detail"), "fallback"},
	} {
		if got := peerMessage(tc.err, "fallback"); got != tc.want {
			t.Errorf("peerMessage(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
	if got := truncateUTF8("aé", 2); got != "a" {
		t.Errorf("truncateUTF8 split a rune: %q", got)
	}
	long := fmt.Errorf("%s: %w", string(make([]byte, 1000)), ErrInvalid)
	if n := len(peerMessage(long, "")); n > maxMessage {
		t.Errorf("message of %d bytes", n)
	}
}
