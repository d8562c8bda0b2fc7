// Package profiling starts the Go runtime's CPU profile and writes a heap
// profile at the end of a run, for the commands and benchmarks that take
// --cpuprofile FILE and --memprofile FILE. Read them with `go tool pprof`.
package profiling

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
)

// Start begins a CPU profile into cpu (when not "") and returns the
// function that ends it and, when mem is not "", writes a heap profile of
// what is live at that moment. Call stop once, when the work is done.
func Start(cpu, mem string) (stop func() error, err error) {
	var cpuFile *os.File
	if cpu != "" {
		if cpuFile, err = os.Create(cpu); err != nil {
			return nil, fmt.Errorf("cpu profile: %w", err)
		}
		if err := pprof.StartCPUProfile(cpuFile); err != nil {
			cpuFile.Close()
			return nil, fmt.Errorf("cpu profile: %w", err)
		}
	}
	return func() error {
		var errs []error
		if cpuFile != nil {
			pprof.StopCPUProfile()
			errs = append(errs, cpuFile.Close())
		}
		if mem != "" {
			errs = append(errs, writeHeap(mem))
		}
		return errors.Join(errs...)
	}, nil
}

func writeHeap(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("memory profile: %w", err)
	}
	runtime.GC() // up-to-date statistics of what is live
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		f.Close()
		return fmt.Errorf("memory profile: %w", err)
	}
	return f.Close()
}
