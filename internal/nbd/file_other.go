//go:build !linux

package nbd

// Systems other than Linux get the portable subset: writes with FUA are
// followed by fsync, and there is no hole punching, fast zeroing or
// allocation lookup.

func (e *FileExport) writeFUA(p []byte, off uint64) error {
	if _, err := e.f.WriteAt(p, int64(off)); err != nil {
		return err
	}
	return e.datasync()
}

func (e *FileExport) datasync() error { return e.f.Sync() }

func (e *FileExport) punchHole(off, length uint64) error { return ErrNotSupported }

func (e *FileExport) zeroRange(off, length uint64) error { return ErrNotSupported }

func (e *FileExport) extents(off, length uint64) ([]Extent, error) { return nil, nil }
