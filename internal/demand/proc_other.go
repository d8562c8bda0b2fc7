//go:build !linux

package demand

import (
	"fmt"
	"os"
	"runtime"
)

func checkProcfs() error {
	return fmt.Errorf("%w: measuring a process tree's memory on %s", ErrUnsupported, runtime.GOOS)
}

func treeUsage(root int) (usage, error) { return usage{}, checkProcfs() }

func killTree(root int, p *os.Process) { _ = p.Kill() }
