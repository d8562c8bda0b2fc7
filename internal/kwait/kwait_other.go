//go:build !linux

package kwait

import (
	"syscall"
	"time"
)

const supported = false

func readFD(uintptr, []byte) (int, error)      { return 0, syscall.EAGAIN }
func waitReadable(uintptr, time.Duration) bool { return false }
