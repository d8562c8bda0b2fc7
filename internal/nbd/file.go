package nbd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
)

// FileExport exports a regular file or a block device. Reads and writes
// are pread and pwrite at the requested offsets, so any number of
// requests run at once; see doc.go for how flushes, FUA, trims, zeroes
// and block status map to system calls. It is safe for concurrent use.
//
// Close closes the file: give each connection its own FileExport (open
// one per Exports.Open; they share the page cache, which is what makes
// CanMultiConn true).
type FileExport struct {
	f        *os.File
	size     uint64
	readOnly bool
	blockDev bool
}

var _ InlineExport = (*FileExport)(nil)

// NewFileExport opens path, a regular file or a block device, for
// export; readOnly opens it read-only and makes writes fail with
// ErrPermission. The size is taken once, now.
func NewFileExport(path string, readOnly bool) (*FileExport, error) {
	flag := os.O_RDWR
	if readOnly {
		flag = os.O_RDONLY
	}
	f, err := os.OpenFile(path, flag, 0)
	if err != nil {
		return nil, fmt.Errorf("nbd: open export: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("nbd: stat export: %w", err)
	}
	e := &FileExport{f: f, readOnly: readOnly}
	switch {
	case fi.Mode().IsRegular():
		e.size = uint64(fi.Size())
	case fi.Mode()&os.ModeDevice != 0 && fi.Mode()&os.ModeCharDevice == 0:
		e.blockDev = true
		size, err := deviceSize(f)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("nbd: size of %s: %w", path, err)
		}
		e.size = size
	default:
		f.Close()
		return nil, fmt.Errorf("nbd: %s is neither a regular file nor a block device", path)
	}
	return e, nil
}

// Inline reports true: FileExport's methods are system calls on local
// storage, best made on the server's reading goroutine (see InlineExport).
func (e *FileExport) Inline() bool { return true }

// Size returns the size taken when the export was opened.
func (e *FileExport) Size() uint64 { return e.size }

// Flags reports every feature, read-only as opened. CanMultiConn holds
// because every FileExport of a file shares the kernel's page cache and a
// flush (fdatasync) on any of them makes every completed write durable.
func (e *FileExport) Flags() ExportFlags {
	return ExportFlags{
		ReadOnly:       e.readOnly,
		CanFlush:       true,
		CanFUA:         true,
		CanTrim:        true,
		CanWriteZeroes: true,
		CanFastZero:    true,
		CanMultiConn:   true,
		CanBlockStatus: true,
	}
}

// ReadAt reads p from offset off (pread).
func (e *FileExport) ReadAt(_ context.Context, p []byte, off uint64) error {
	n, err := e.f.ReadAt(p, int64(off))
	if err == io.EOF && n < len(p) {
		// The file shrank under the export.
		return fmt.Errorf("nbd: read past the end of the file: %w", ErrIO)
	}
	if err != nil && err != io.EOF {
		return err
	}
	return nil
}

// WriteAt writes p at offset off (pwrite), and with fua durably
// (pwritev2 with RWF_DSYNC, or pwrite then fdatasync).
func (e *FileExport) WriteAt(_ context.Context, p []byte, off uint64, fua bool) error {
	if e.readOnly {
		return errReadOnly
	}
	if fua {
		return e.writeFUA(p, off)
	}
	_, err := e.f.WriteAt(p, int64(off))
	return err
}

// Flush makes completed writes durable (fdatasync).
func (e *FileExport) Flush(context.Context) error {
	if e.readOnly {
		return nil
	}
	return e.datasync()
}

// Trim punches a hole over the range (fallocate PUNCH_HOLE|KEEP_SIZE).
// A file system or device that cannot punch holes makes it a no-op.
func (e *FileExport) Trim(_ context.Context, off, length uint64, fua bool) error {
	if e.readOnly {
		return errReadOnly
	}
	if err := e.punchHole(off, length); err != nil && !errors.Is(err, ErrNotSupported) {
		return err
	}
	if fua {
		return e.datasync()
	}
	return nil
}

// Zero makes the range read as zeroes: it punches a hole unless f.NoHole,
// else zeroes the range in place (fallocate ZERO_RANGE); if the file
// system can do neither, it writes zeroes, or with f.Fast fails with
// ErrNotSupported having changed nothing.
func (e *FileExport) Zero(_ context.Context, off, length uint64, f ZeroFlags) error {
	if e.readOnly {
		return errReadOnly
	}
	err := ErrNotSupported
	if !f.NoHole {
		err = e.punchHole(off, length)
	}
	if errors.Is(err, ErrNotSupported) {
		err = e.zeroRange(off, length)
	}
	if errors.Is(err, ErrNotSupported) {
		if f.Fast {
			return fmt.Errorf("nbd: no fast zeroing here: %w", ErrNotSupported)
		}
		err = e.writeZeroes(off, length)
	}
	if err != nil {
		return err
	}
	if f.FUA {
		return e.datasync()
	}
	return nil
}

// writeZeroes zeroes the range by writing zero bytes.
func (e *FileExport) writeZeroes(off, length uint64) error {
	for length > 0 {
		n := min(length, uint64(len(zeroes)))
		if _, err := e.f.WriteAt(zeroes[:n], int64(off)); err != nil {
			return err
		}
		off += n
		length -= n
	}
	return nil
}

// BlockStatus describes the range as data and holes (lseek SEEK_DATA and
// SEEK_HOLE); holes read as zeroes. Where the file system or device
// cannot tell, the whole range is reported allocated.
func (e *FileExport) BlockStatus(_ context.Context, off, length uint64) ([]Extent, error) {
	ext, err := e.extents(off, length)
	if err != nil || len(ext) == 0 {
		return []Extent{{Length: length}}, nil
	}
	return ext, nil
}

// deviceSize returns a block device's size: the offset of its end.
func deviceSize(f *os.File) (uint64, error) {
	end, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return 0, err
	}
	return uint64(end), nil
}

// Close closes the file.
func (e *FileExport) Close() error {
	return e.f.Close()
}

var errReadOnly = fmt.Errorf("nbd: export is read-only: %w", ErrPermission)
