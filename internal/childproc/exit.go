package childproc

import (
	"fmt"
	"log"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// A program that starts processes or makes temporary folders (a benchmark)
// registers their removal with AtExit and ends through Exit or Fatal, so
// that an error or an interrupt leaves nothing behind: log.Fatal and a
// signal's default action skip deferred calls.

var (
	exitMu    sync.Mutex
	exitFuncs []func()
	exitOnce  sync.Once
)

// AtExit registers f to run when the program ends through Exit or Fatal,
// or on SIGINT, SIGTERM or SIGHUP (then the program exits with 128 plus
// the signal's number). Registered functions run last first, once.
func AtExit(f func()) {
	exitMu.Lock()
	exitFuncs = append(exitFuncs, f)
	exitMu.Unlock()
	exitOnce.Do(func() {
		c := make(chan os.Signal, 1)
		signal.Notify(c, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
		go func() {
			s := <-c
			fmt.Fprintf(os.Stderr, "%s: cleaning up\n", s)
			Exit(128 + int(s.(syscall.Signal)))
		}()
	})
}

// RunAtExit runs the registered functions, last first, and forgets them.
// A program that returns from main normally calls it (deferred) instead of
// Exit.
func RunAtExit() {
	exitMu.Lock()
	fs := exitFuncs
	exitFuncs = nil
	exitMu.Unlock()
	for i := len(fs) - 1; i >= 0; i-- {
		fs[i]()
	}
}

// Exit runs the registered functions and exits with code.
func Exit(code int) {
	RunAtExit()
	os.Exit(code)
}

// Fatal is log.Fatal that runs the registered functions first.
func Fatal(v ...any) {
	log.Output(2, fmt.Sprint(v...))
	Exit(1)
}

// Fatalf is log.Fatalf that runs the registered functions first.
func Fatalf(format string, v ...any) {
	log.Output(2, fmt.Sprintf(format, v...))
	Exit(1)
}
