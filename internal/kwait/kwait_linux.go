package kwait

import (
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

const supported = true

// readFD reads from the socket fd once, without waiting.
func readFD(fd uintptr, p []byte) (int, error) {
	for {
		n, err := syscall.Read(int(fd), p)
		if err == syscall.EINTR {
			continue
		}
		if n < 0 {
			n = 0
		}
		return n, err
	}
}

// waitReadable blocks the thread until fd is readable (or has an error or
// hang-up to report, which the read then returns), for at most d.
func waitReadable(fd uintptr, d time.Duration) bool {
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	ts := unix.NsecToTimespec(int64(d))
	n, err := unix.Ppoll(fds, &ts, nil)
	return err == nil && n > 0 && fds[0].Revents != 0
}
