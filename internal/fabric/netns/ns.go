package netns

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// NamespaceDir is where named network namespaces are bind-mounted, as
// iproute2 and the netns library do.
const NamespaceDir = "/var/run/netns"

// ErrUnsupported: this process cannot create network namespaces (not root,
// no CAP_SYS_ADMIN / CAP_NET_ADMIN, or a kernel without them).
var ErrUnsupported = errors.New("network namespaces unavailable")

// space is one named namespace the driver created, with an open handle to
// it and a netlink handle inside it.
type space struct {
	name string
	fd   netns.NsHandle
	nl   *netlink.Handle
}

// onThread runs fn on a goroutine locked to its own OS thread, in that
// thread's network namespace as fn leaves it, and returns fn's error. If
// fn switched namespaces, onThread switches back to the namespace the
// thread started in; when that fails the thread stays locked and the Go
// runtime discards it when the goroutine exits, so no goroutine ever runs
// in a namespace it did not ask for.
func onThread(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("current network namespace: %w", err)
			return
		}
		defer orig.Close()
		ferr := fn()
		cur, err := netns.Get()
		if err == nil && cur.Equal(orig) {
			cur.Close()
			runtime.UnlockOSThread()
			errc <- ferr
			return
		}
		if err == nil {
			cur.Close()
		}
		if err := netns.Set(orig); err != nil {
			// Leave the thread locked: it dies with this goroutine.
			errc <- errors.Join(ferr, fmt.Errorf("restore network namespace: %w", err))
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// RunIn runs fn with the calling code's network namespace set to the named
// namespace (one of Driver.Namespaces, or any name under NamespaceDir).
// Sockets fn opens belong to that namespace for their whole life and may
// be used from any goroutine afterwards; fn must not start goroutines that
// expect to be in the namespace.
func RunIn(name string, fn func() error) error {
	return onThread(func() error {
		h, err := netns.GetFromName(name)
		if err != nil {
			return fmt.Errorf("network namespace %s: %w", name, err)
		}
		defer h.Close()
		if err := netns.Set(h); err != nil {
			return fmt.Errorf("enter network namespace %s: %w", name, err)
		}
		return fn()
	})
}

// Namespaces lists the named network namespaces whose names start with
// prefix followed by "-" (every namespace a driver with that prefix
// creates), sorted. A missing NamespaceDir lists nothing.
func Namespaces(prefix string) ([]string, error) {
	ents, err := os.ReadDir(NamespaceDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), prefix+"-") {
			out = append(out, e.Name())
		}
	}
	slices.Sort(out)
	return out, nil
}

// createSpace creates the named namespace name, replacing a stale one of
// that name, brings its loopback up, switches IPv4 forwarding off and
// opens a netlink handle in it.
func createSpace(name string) (*space, error) {
	if _, err := os.Stat(filepath.Join(NamespaceDir, name)); err == nil {
		if err := deleteNamed(name); err != nil {
			return nil, fmt.Errorf("remove stale network namespace %s: %w", name, err)
		}
	}
	fd := netns.None()
	err := onThread(func() error {
		h, err := netns.NewNamed(name)
		if err != nil {
			return err
		}
		fd = h
		// Still inside the new namespace: its /proc/sys/net is its own.
		return os.WriteFile("/proc/sys/net/ipv4/conf/all/forwarding", []byte("0"), 0)
	})
	if err != nil {
		if fd.IsOpen() {
			fd.Close()
			_ = deleteNamed(name)
		}
		if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
			return nil, fmt.Errorf("create network namespace %s (needs root: CAP_SYS_ADMIN and CAP_NET_ADMIN): %w: %w", name, ErrUnsupported, err)
		}
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
			return nil, fmt.Errorf("create network namespace %s (kernel without network namespaces): %w: %w", name, ErrUnsupported, err)
		}
		return nil, fmt.Errorf("create network namespace %s: %w", name, err)
	}
	nl, err := netlink.NewHandleAt(fd, unix.NETLINK_ROUTE)
	if err != nil {
		fd.Close()
		_ = deleteNamed(name)
		return nil, fmt.Errorf("netlink in network namespace %s: %w", name, err)
	}
	s := &space{name: name, fd: fd, nl: nl}
	lo, err := nl.LinkByName("lo")
	if err == nil {
		err = nl.LinkSetUp(lo)
	}
	if err != nil {
		s.close()
		return nil, fmt.Errorf("loopback of network namespace %s: %w", name, err)
	}
	return s, nil
}

// close releases the handles and removes the namespace's name; the kernel
// frees the namespace, and every link in it, once nothing else holds it
// (a socket a test left open in it, for example).
func (s *space) close() error {
	if s == nil {
		return nil
	}
	if s.nl != nil {
		s.nl.Close()
		s.nl = nil
	}
	if s.fd.IsOpen() {
		s.fd.Close()
		s.fd = netns.None()
	}
	if err := deleteNamed(s.name); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove network namespace %s: %w", s.name, err)
	}
	return nil
}

// deleteNamed unmounts and removes a named namespace; a name that is not
// mounted (left by an interrupted creation) is just removed.
func deleteNamed(name string) error {
	err := netns.DeleteNamed(name)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
		err = os.Remove(filepath.Join(NamespaceDir, name))
	}
	return err
}

// linkList lists the links of s, retrying a dump the kernel interrupted.
func (s *space) linkList() ([]netlink.Link, error) {
	for range 5 {
		ls, err := s.nl.LinkList()
		if errors.Is(err, netlink.ErrDumpInterrupted) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("list links in %s: %w", s.name, err)
		}
		return ls, nil
	}
	return nil, fmt.Errorf("list links in %s: %w", s.name, netlink.ErrDumpInterrupted)
}

// linkByName returns s's link name, or nil when there is none.
func (s *space) linkByName(name string) (netlink.Link, error) {
	l, err := s.nl.LinkByName(name)
	var nf netlink.LinkNotFoundError
	if errors.As(err, &nf) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("link %s in %s: %w", name, s.name, err)
	}
	return l, nil
}

// setUp sets link name of s up or down.
func (s *space) setUp(name string, up bool) error {
	l, err := s.linkByName(name)
	if err != nil || l == nil {
		return err
	}
	if up {
		err = s.nl.LinkSetUp(l)
	} else {
		err = s.nl.LinkSetDown(l)
	}
	if err != nil {
		return fmt.Errorf("set %s in %s up=%v: %w", name, s.name, up, err)
	}
	return nil
}
