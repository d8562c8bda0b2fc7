package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"rackpool/api"
	"rackpool/internal/clock"
	"rackpool/internal/memory"
	"rackpool/internal/units"
)

// Pooled memory verbs: memnode (the data-plane server), lease, leases,
// renew, release, memnodes (clients of the GetMemory API).

func runLease(args []string) error {
	fs, cf := newClientFlags("lease")
	cf.idFlag(fs, "lease")
	size := fs.String("size", "", "bytes to lease, e.g. 64MiB (required)")
	host := fs.String("host", "", "topology host the memory is for: the nearest memory node is picked")
	ttl := ttlFlag(fs, "lease `duration`, positive (default: the service's, 10m)")
	rights := fs.String("rights", "", "r, w or rw (default rw)")
	maxLat := fs.Float64("max-latency", 0, "largest acceptable round trip from --host, in ns")
	node := fs.String("node", "", "pin the lease to one memory node")
	mapped := fs.Bool("mapped", false, "memory --host can map with loads and stores (a memory node on its machine)")
	if _, err := parseInterspersed(fs, args); err != nil {
		return err
	}
	if *size == "" {
		return errors.New("usage: rackpool lease --size SIZE [--host H] [--ttl D] [--rights rw] [--max-latency NS] [--node N] [--mapped]")
	}
	n, err := units.ParsePositive(*size)
	if err != nil {
		return fmt.Errorf("--size: %w", err)
	}
	c, err := cf.client()
	if err != nil {
		return err
	}
	l, err := c.GetMemory(context.Background(), api.LeaseRequest{Size: n, Host: *host, TTL: *ttl, Rights: *rights,
		MaxLatencyNs: *maxLat, MemoryNode: *node, Mapped: *mapped})
	if err != nil {
		return err
	}
	switch {
	case cf.json:
		return printJSON(l)
	case cf.quiet:
		fmt.Println(l.ID)
		return nil
	}
	printGrant(l)
	return nil
}

func printGrant(l *api.MemoryLease) {
	fmt.Printf("%s: %s on %s at %s (offset %d), %s, expires %s\n", l.ID, human(int64(l.CapacityBytes)), l.MemoryNode,
		l.Endpoint, l.Offset, l.Rights, l.Expires.Local().Format(time.RFC3339))
	if l.Host != "" {
		fmt.Printf("round trip from %s: %.1f ns, %d hops\n", l.Host, l.RoundTripNs, l.Hops)
	}
	if l.MapSocket != "" {
		fmt.Printf("mappable from %s through %s\n", l.Host, l.MapSocket)
	}
	fmt.Printf("token: %s\n", l.Token)
}

func runLeases(args []string) error {
	fs, cf := newClientFlags("leases")
	if _, err := parseInterspersed(fs, args); err != nil {
		return err
	}
	c, err := cf.client()
	if err != nil {
		return err
	}
	ls, err := c.Leases(context.Background())
	if err != nil {
		return err
	}
	if cf.json {
		return printJSON(ls)
	}
	var rows [][]string
	for _, l := range ls {
		rows = append(rows, []string{l.ID, l.MemoryNode, human(int64(l.CapacityBytes)), strconv.FormatUint(l.Offset, 10),
			l.Rights, l.State, l.Expires.Local().Format(time.RFC3339), orDash(l.Tenant), orDash(l.Host)})
	}
	table("LEASE\tNODE\tSIZE\tOFFSET\tRIGHTS\tSTATE\tEXPIRES\tTENANT\tHOST", rows)
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func runRenew(args []string) error {
	fs, cf := newClientFlags("renew")
	ttl := ttlFlag(fs, "new `duration` from now, positive (default: the service's)")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return errors.New("usage: rackpool renew LEASE [--ttl D]")
	}
	c, err := cf.client()
	if err != nil {
		return err
	}
	l, err := c.RenewLease(context.Background(), pos[0], *ttl)
	if err != nil {
		return err
	}
	if cf.json {
		return printJSON(l)
	}
	printGrant(l)
	return nil
}

func runRelease(args []string) error {
	fs, cf := newClientFlags("release")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return errors.New("usage: rackpool release LEASE [LEASE ...]")
	}
	c, err := cf.client()
	if err != nil {
		return err
	}
	var errs []error
	for _, id := range pos {
		if err := c.ReleaseLease(context.Background(), id); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", id, err))
			continue
		}
		if !cf.json {
			fmt.Println("released", id)
		}
	}
	return errors.Join(errs...)
}

func runMemnodes(args []string) error {
	fs, cf := newClientFlags("memnodes")
	if _, err := parseInterspersed(fs, args); err != nil {
		return err
	}
	c, err := cf.client()
	if err != nil {
		return err
	}
	ns, err := c.MemoryNodes(context.Background())
	if err != nil {
		return err
	}
	if cf.json {
		return printJSON(ns)
	}
	var rows [][]string
	for _, n := range ns {
		state := "online"
		if !n.Online {
			state = "offline"
		}
		rows = append(rows, []string{n.ID, n.Endpoint, human(int64(n.CapacityBytes)), human(int64(n.LeasedBytes)),
			strconv.Itoa(n.Leases), state, strconv.Itoa(len(n.Links.ResourceBlocks))})
	}
	table("NODE\tENDPOINT\tCAPACITY\tLEASED\tLEASES\tSTATE\tBLOCKS", rows)
	return nil
}

// listenUnix listens on the unix socket path, replacing a stale socket a
// previous run left behind (never another kind of file), readable and
// writable by the owner and group only: a client needs both the socket and
// a token. Its directory is created if missing (/run/rackpool after a
// boot).
func listenUnix(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("%s exists and is not a socket", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, err
		}
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o660); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

// runMemnode serves pooled memory: it registers with the control plane,
// heartbeats, and serves leased regions to token holders.
func runMemnode(args []string) error {
	fs := flag.NewFlagSet("memnode", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:7070", "address to serve the memory protocol on")
	capacity := fs.String("capacity", "1GiB", "memory to serve")
	control := fs.String("control", os.Getenv("RACKPOOL_URL"), "control plane URL (credentials from RACKPOOL_USER / RACKPOOL_PASSWORD)")
	var caFile string
	caFlag(fs, &caFile)
	device := fs.String("device", "", "topology memory device this node serves (default: the first one without a node)")
	advertise := fs.String("advertise", "", "address clients should dial (default: the listening address)")
	mapSocket := fs.String("map-socket", "", "unix socket for mapped leases: local clients map their lease's memory (load/store) instead of using TCP")
	mapHosts := fs.String("map-hosts", "", "comma-separated topology hosts on this machine, whose leases may be mapped (needs --map-socket)")
	heartbeat := fs.Duration("heartbeat", 10*time.Second, "how often to re-register with the control plane (each heartbeat reports the bytes each lease has in use)")
	verbose := fs.Bool("v", false, "log debug messages")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if *control == "" {
		return errors.New("--control URL is required (or set RACKPOOL_URL)")
	}
	size, err := units.ParsePositive(*capacity)
	if err != nil {
		return fmt.Errorf("--capacity: %w", err)
	}
	if *heartbeat <= 0 {
		return errors.New("--heartbeat must be positive")
	}
	var hosts []string
	if *mapHosts != "" {
		hosts = strings.Split(*mapHosts, ",")
	}
	if (*mapSocket == "") != (len(hosts) == 0) {
		return errors.New("--map-socket and --map-hosts go together")
	}
	sockPath := *mapSocket
	if sockPath != "" {
		if sockPath, err = filepath.Abs(sockPath); err != nil {
			return fmt.Errorf("--map-socket: %w", err)
		}
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	cf := &clientFlags{url: *control, caFile: caFile}
	c, err := cf.client()
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	endpoint := *advertise
	if endpoint == "" {
		endpoint = l.Addr().String()
	}
	var ul net.Listener
	if sockPath != "" {
		if ul, err = listenUnix(sockPath); err != nil {
			l.Close()
			return fmt.Errorf("--map-socket: %w", err)
		}
		defer ul.Close()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// The server checks that tokens name its node, so it is built for the
	// node the control plane binds it to. Without --device the first
	// registration learns that name; the server is then built again for it
	// and registers with its own epoch (a fresh process either way: its
	// memory is new).
	newServer := func(node string) (*memory.Server, error) {
		key, err := memory.NewKey() // replaced by the control plane's key at registration
		if err != nil {
			return nil, err
		}
		return memory.NewServer(memory.ServerOptions{Node: node, Capacity: size, Key: key, Logger: log})
	}
	var srv *memory.Server
	reg := api.NodeRegistration{Device: *device, Endpoint: endpoint, CapacityBytes: size, MapSocket: sockPath, MapHosts: hosts}
	register := func() (*api.MemoryNode, error) {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		reg.Epoch = srv.Epoch()
		// Each heartbeat carries the bytes each lease has in use
		// (telemetry: the control plane records them per lease).
		reg.LeaseUsage = reg.LeaseUsage[:0]
		usage := srv.LeaseUsage()
		for _, id := range slices.Sorted(maps.Keys(usage)) {
			reg.LeaseUsage = append(reg.LeaseUsage, api.LeaseUsage{Lease: id, BytesInUse: usage[id]})
		}
		n, err := c.RegisterMemoryNode(rctx, reg)
		if err != nil {
			return nil, err
		}
		if n.ID != reg.Device {
			return n, nil
		}
		key, err := n.Key()
		if err != nil {
			return nil, err
		}
		srv.SetKey(key)
		for id, until := range n.Revoked {
			t, err := time.Parse(time.RFC3339Nano, until)
			if err != nil {
				return nil, fmt.Errorf("revocation of %s: %w", id, err)
			}
			srv.Revoke(id, t)
		}
		return n, nil
	}
	name := *device
	if name == "" {
		name = "unbound"
	}
	var n *api.MemoryNode
	for range 2 {
		if srv, err = newServer(name); err != nil {
			l.Close()
			return err
		}
		if n, err = register(); err != nil {
			l.Close()
			return fmt.Errorf("register with %s: %w", *control, err)
		}
		if n.ID == name {
			break
		}
		name, reg.Device = n.ID, n.ID
	}
	if n.ID != name {
		l.Close()
		return fmt.Errorf("register with %s: bound to %s, then to %s", *control, name, n.ID)
	}
	log.Info("memnode serving", "node", n.ID, "addr", endpoint, "capacity", size, "blocks", len(n.Links.ResourceBlocks), "control", *control)
	go func() {
		t := clock.NewTicker(clock.Real{}, *heartbeat)
		defer t.Stop()
		failing := false
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C():
			}
			if _, err := register(); err != nil {
				if !failing {
					log.Warn("heartbeat to the control plane failed; serving on with the last key", "err", err)
				}
				failing = true
			} else if failing {
				log.Info("heartbeat to the control plane restored")
				failing = false
			}
		}
	}()
	errc := make(chan error, 2)
	go func() { errc <- srv.Serve(l) }()
	if ul != nil {
		log.Info("memnode mapping leases", "socket", sockPath, "hosts", strings.Join(hosts, ","))
		go func() { errc <- srv.Serve(ul) }()
	}
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		log.Info("memnode stopping")
		return srv.Close()
	}
}
