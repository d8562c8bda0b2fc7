package nbd

import (
	"net"
	"os"
	"os/signal"
	"runtime/pprof"
	"testing"
)

// TestServeFile serves a file until interrupted, for profiling and for
// comparing with other servers by hand:
//
//	NBD_SERVE_SOCKET=/tmp/s NBD_SERVE_FILE=disk.img go test -run TestServeFile ./internal/nbd
//
// The export is called "" and "disk". It is skipped unless both are set;
// NBD_SERVE_CPUPROFILE names a file for a CPU profile of the run.
func TestServeFile(t *testing.T) {
	sock, file := os.Getenv("NBD_SERVE_SOCKET"), os.Getenv("NBD_SERVE_FILE")
	if sock == "" || file == "" {
		t.Skip("NBD_SERVE_SOCKET and NBD_SERVE_FILE not set")
	}
	x := newTestExports()
	x.add("", file, "", false)
	x.add("disk", file, "", false)
	srv := &Server{Exports: x}
	os.Remove(sock)
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	if prof := os.Getenv("NBD_SERVE_CPUPROFILE"); prof != "" {
		f, err := os.Create(prof)
		if err != nil {
			t.Fatal(err)
		}
		pprof.StartCPUProfile(f)
		defer func() {
			pprof.StopCPUProfile()
			f.Close()
		}()
	}
	go func() {
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, os.Interrupt)
		<-ch
		srv.Close()
	}()
	if err := srv.Serve(l); err != nil {
		t.Fatal(err)
	}
}
