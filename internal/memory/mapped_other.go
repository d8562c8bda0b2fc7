//go:build !linux

package memory

import (
	"context"
	"errors"
)

var errNoMapping = errors.New("memory: mapped leases need Linux (memfd and descriptor passing)")

type grantMem struct{ buf []byte }

func newGrantMem(uint64) (*grantMem, error)         { return nil, errNoMapping }
func (g *grantMem) fdFor(bool) (int, func(), error) { return -1, nil, errNoMapping }
func (g *grantMem) used() uint64                    { return 0 }
func (g *grantMem) discard() error                  { return nil }
func rightsOf(int) []byte                           { return nil }

// Mapping is a mapped lease region; see the Linux implementation.
type Mapping struct{}

// Map is not available on this system.
func Map(context.Context, string, string) (*Mapping, error) { return nil, errNoMapping }
