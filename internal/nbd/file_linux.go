//go:build linux

package nbd

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// maxFileExtents bounds the runs one BlockStatus call looks up.
const maxFileExtents = 1024

// control runs fn with f's descriptor, which stays open meanwhile.
func control(f *os.File, fn func(fd int) error) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = fn(int(fd)) }); err != nil {
		return err
	}
	return ferr
}

// writeFUA writes p at off durably: one pwritev2 with RWF_DSYNC, falling
// back to pwrite and fdatasync where the kernel lacks it.
func (e *FileExport) writeFUA(p []byte, off uint64) error {
	err := control(e.f, func(fd int) error {
		iov := [][]byte{p}
		for len(iov[0]) > 0 {
			n, err := unix.Pwritev2(fd, iov, int64(off), unix.RWF_DSYNC)
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				return err
			}
			iov[0] = iov[0][n:]
			off += uint64(n)
		}
		return nil
	})
	if err == nil {
		return nil
	}
	if !errors.Is(err, unix.ENOSYS) && !errors.Is(err, unix.EOPNOTSUPP) && !errors.Is(err, unix.EINVAL) {
		return &os.PathError{Op: "pwritev2", Path: e.f.Name(), Err: err}
	}
	if _, err := e.f.WriteAt(p, int64(off)); err != nil {
		return err
	}
	return e.datasync()
}

// datasync flushes the file's data (fdatasync).
func (e *FileExport) datasync() error {
	err := control(e.f, func(fd int) error {
		for {
			err := unix.Fdatasync(fd)
			if err != unix.EINTR {
				return err
			}
		}
	})
	if err != nil {
		return &os.PathError{Op: "fdatasync", Path: e.f.Name(), Err: err}
	}
	return nil
}

// punchHole deallocates the range, which then reads as zeroes; it
// returns an error wrapping ErrNotSupported where that cannot be done.
func (e *FileExport) punchHole(off, length uint64) error {
	return e.fallocate(unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, length)
}

// zeroRange zeroes the range and keeps it allocated; it returns an error
// wrapping ErrNotSupported where that cannot be done fast.
func (e *FileExport) zeroRange(off, length uint64) error {
	return e.fallocate(unix.FALLOC_FL_ZERO_RANGE|unix.FALLOC_FL_KEEP_SIZE, off, length)
}

func (e *FileExport) fallocate(mode uint32, off, length uint64) error {
	err := control(e.f, func(fd int) error {
		for {
			err := unix.Fallocate(fd, mode, int64(off), int64(length))
			if err != unix.EINTR {
				return err
			}
		}
	})
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.ENOSYS), errors.Is(err, unix.ENODEV):
		return fmt.Errorf("nbd: fallocate mode %#x: %w", mode, ErrNotSupported)
	case e.blockDev && errors.Is(err, unix.EINVAL):
		// Block devices refuse unaligned ranges.
		return fmt.Errorf("nbd: fallocate mode %#x: %w", mode, ErrNotSupported)
	}
	return &os.PathError{Op: "fallocate", Path: e.f.Name(), Err: err}
}

// extents looks up data and holes over [off, off+length) with lseek.
func (e *FileExport) extents(off, length uint64) ([]Extent, error) {
	if e.blockDev {
		return nil, nil
	}
	var ext []Extent
	err := control(e.f, func(fd int) error {
		pos, end := off, off+length
		for pos < end && len(ext) < maxFileExtents {
			data, err := unix.Seek(fd, int64(pos), unix.SEEK_DATA)
			if err == unix.ENXIO {
				// No data from pos to the end of the file.
				ext = append(ext, Extent{Length: end - pos, Hole: true, Zero: true})
				return nil
			}
			if err != nil {
				return err
			}
			if uint64(data) > pos {
				n := min(uint64(data), end) - pos
				ext = append(ext, Extent{Length: n, Hole: true, Zero: true})
				pos += n
				continue
			}
			hole, err := unix.Seek(fd, int64(pos), unix.SEEK_HOLE)
			if err != nil {
				return err
			}
			n := min(max(uint64(hole), pos+1), end) - pos
			ext = append(ext, Extent{Length: n})
			pos += n
		}
		return nil
	})
	return ext, err
}
