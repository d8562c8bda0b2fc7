//go:build linux && (amd64 || arm64 || riscv64 || loong64)

package pager

import (
	"errors"
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The userfaultfd ABI (include/uapi/linux/userfaultfd.h). golang.org/x/sys
// has the syscall number but not the structures or ioctl numbers; the
// numbers below use the generic _IOC encoding of the architectures this file
// builds for.

const (
	uffdAPI = 0xAA

	uffdEventPagefault = 0x12

	uffdPagefaultFlagWrite = 1 << 0
	uffdPagefaultFlagWP    = 1 << 1

	uffdFeatureMissingShmem            = 1 << 5
	uffdFeatureWPHugetlbfsShmem        = 1 << 12
	uffdRegisterModeMissing            = 1 << 0
	uffdRegisterModeWP                 = 1 << 1
	uffdioCopyModeDontwake             = 1 << 0
	uffdioCopyModeWP                   = 1 << 1
	uffdioWriteprotectModeWP           = 1 << 0
	uffdUserModeOnly                   = 1
	uffdioIoctlCopy                    = 1 << 0x03
	uffdioIoctlWriteprotect            = 1 << 0x06
	uffdMsgSize                        = 32
	iocWrite, iocRead           uint32 = 1, 2
)

func ioc(dir, nr, size uint32) uint { return uint(dir<<30 | size<<16 | uffdAPI<<8 | nr) }

type uffdioAPI struct{ API, Features, Ioctls uint64 }
type uffdioRange struct{ Start, Len uint64 }
type uffdioRegister struct {
	Range        uffdioRange
	Mode, Ioctls uint64
}
type uffdioCopy struct {
	Dst, Src, Len, Mode uint64
	Copy                int64
}
type uffdioWriteprotect struct {
	Range uffdioRange
	Mode  uint64
}

var (
	ioctlAPI          = ioc(iocRead|iocWrite, 0x3F, uint32(unsafe.Sizeof(uffdioAPI{})))
	ioctlRegister     = ioc(iocRead|iocWrite, 0x00, uint32(unsafe.Sizeof(uffdioRegister{})))
	ioctlUnregister   = ioc(iocRead, 0x01, uint32(unsafe.Sizeof(uffdioRange{})))
	ioctlWake         = ioc(iocRead, 0x02, uint32(unsafe.Sizeof(uffdioRange{})))
	ioctlCopy         = ioc(iocRead|iocWrite, 0x03, uint32(unsafe.Sizeof(uffdioCopy{})))
	ioctlWriteprotect = ioc(iocRead|iocWrite, 0x06, uint32(unsafe.Sizeof(uffdioWriteprotect{})))
	// USERFAULTFD_IOC_NEW is _IO(0xAA, 0x00).
	ioctlNewUffd = uint(uffdAPI << 8)
)

func ioctl(fd int, req uint, arg unsafe.Pointer) error {
	for {
		_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), uintptr(req), uintptr(arg))
		if e == unix.EINTR {
			continue
		}
		if e != 0 {
			return e
		}
		return nil
	}
}

// newUffd opens a userfaultfd for this process's memory, blocking and
// close-on-exec, through /dev/userfaultfd (which needs no privilege beyond
// the device's permissions) or else the userfaultfd system call (which,
// with vm.unprivileged_userfaultfd=0, needs CAP_SYS_PTRACE unless it is
// limited to user-mode faults, which is all the pager needs).
func newUffd() (int, error) {
	flags := uintptr(unix.O_CLOEXEC | uffdUserModeOnly)
	var devErr error
	if dev, err := os.OpenFile("/dev/userfaultfd", os.O_RDWR, 0); err == nil {
		fd, _, e := unix.Syscall(unix.SYS_IOCTL, dev.Fd(), uintptr(ioctlNewUffd), flags)
		dev.Close()
		if e == 0 {
			return int(fd), nil
		}
		devErr = fmt.Errorf("/dev/userfaultfd: %w", e)
	} else {
		devErr = err
	}
	fd, _, e := unix.Syscall(unix.SYS_USERFAULTFD, flags, 0, 0)
	if e != 0 {
		return -1, fmt.Errorf("%w: %w; userfaultfd(2): %w", ErrUnsupported, devErr, e)
	}
	return int(fd), nil
}

// initUffd enables the features the pager needs and registers the region
// for missing-page and write-protect faults.
func initUffd(fd int, base, size uintptr) error {
	api := uffdioAPI{API: uffdAPI, Features: uffdFeatureMissingShmem | uffdFeatureWPHugetlbfsShmem}
	if err := ioctl(fd, ioctlAPI, unsafe.Pointer(&api)); err != nil {
		return fmt.Errorf("%w: UFFDIO_API with shmem missing and write-protect faults (Linux 5.19 or later): %w", ErrUnsupported, err)
	}
	reg := uffdioRegister{Range: uffdioRange{uint64(base), uint64(size)}, Mode: uffdRegisterModeMissing | uffdRegisterModeWP}
	if err := ioctl(fd, ioctlRegister, unsafe.Pointer(&reg)); err != nil {
		return fmt.Errorf("%w: UFFDIO_REGISTER: %w", ErrUnsupported, err)
	}
	if need := uint64(uffdioIoctlCopy | uffdioIoctlWriteprotect); reg.Ioctls&need != need {
		return fmt.Errorf("%w: registered range lacks UFFDIO_COPY or UFFDIO_WRITEPROTECT (ioctls %#x)", ErrUnsupported, reg.Ioctls)
	}
	return nil
}

func uffdRange(fd int, req uint, start, n uintptr) error {
	r := uffdioRange{uint64(start), uint64(n)}
	return ioctl(fd, req, unsafe.Pointer(&r))
}

// uffdCopy installs src at dst, write-protected if wp, without waking the
// threads waiting on the range (the caller wakes them once its counters
// are up to date). It returns the bytes installed before an error.
func uffdCopy(fd int, dst uintptr, src []byte, wp bool) (int, error) {
	c := uffdioCopy{Dst: uint64(dst), Src: uint64(uintptr(unsafe.Pointer(&src[0]))), Len: uint64(len(src)), Mode: uffdioCopyModeDontwake}
	if wp {
		c.Mode |= uffdioCopyModeWP
	}
	err := ioctl(fd, ioctlCopy, unsafe.Pointer(&c))
	if c.Copy > 0 {
		return int(c.Copy), err
	}
	return 0, err
}

// uffdProtect sets (wp) or clears write protection on a range; clearing
// also wakes the threads waiting on it.
func uffdProtect(fd int, start, n uintptr, wp bool) error {
	w := uffdioWriteprotect{Range: uffdioRange{uint64(start), uint64(n)}}
	if wp {
		w.Mode = uffdioWriteprotectModeWP
	}
	return ioctl(fd, ioctlWriteprotect, unsafe.Pointer(&w))
}

var errShortMsg = errors.New("pager: short userfaultfd message")
