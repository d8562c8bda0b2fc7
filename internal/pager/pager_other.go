//go:build !linux || !(amd64 || arm64 || riscv64 || loong64)

package pager

import (
	"context"
	"fmt"
	"runtime"
)

// Pager is a region backed by pooled memory; on this system Open always
// fails with ErrUnsupported.
type Pager struct{}

// Open fails: paging through userfaultfd needs Linux.
func Open(ctx context.Context, opts Options) (*Pager, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("%w (%s/%s)", ErrUnsupported, runtime.GOOS, runtime.GOARCH)
}

// RunHelper has nothing to serve on this system.
func RunHelper() int { return 2 }

// Bytes returns nil.
func (p *Pager) Bytes() []byte { return nil }

// Access returns ErrClosed.
func (p *Pager) Access(f func(region []byte)) error { return ErrClosed }

// Err returns nil.
func (p *Pager) Err() error { return nil }

// Failed returns nil.
func (p *Pager) Failed() <-chan struct{} { return nil }

// Stats returns zeros.
func (p *Pager) Stats() Stats { return Stats{} }

// Close does nothing.
func (p *Pager) Close() error { return nil }
