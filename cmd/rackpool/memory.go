package main

import (
	"context"
	"errors"
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

	"github.com/spf13/cobra"

	"rackpool/api"
	"rackpool/cmd/rackpool/internal/cli"
	"rackpool/internal/clock"
	"rackpool/internal/memory"
	"rackpool/internal/units"
)

// Pooled memory verbs: memnode (the data-plane server), lease, leases,
// renew, release, memnodes (clients of the GetMemory API).

func leaseCmd() *cobra.Command {
	cf := &clientFlags{}
	var req api.LeaseRequest
	var size string
	cmd := clientVerb(&cobra.Command{
		Use:   "lease [-q] --size SIZE [--host H] [--ttl D]",
		Short: "lease pooled memory (GetMemory): endpoint, token, expiry",
		Long: "Leases pooled memory from the memory node nearest --host (or --node): prints the node's endpoint,\n" +
			"the lease's offset and a capability token for it, valid until the lease expires (docs/memory.md).",
		Example: "  LEASE=$(rackpool lease -q --size 64MiB --host host1)",
		Args:    cli.NoArgs,
	}, cf, func(ctx context.Context, c *api.Client, _ []string) error {
		if size == "" {
			return cli.Usagef("usage: rackpool lease --size SIZE [--host H] [--ttl D] [--rights rw] [--max-latency NS] [--node N] [--mapped]")
		}
		n, err := units.ParsePositive(size)
		if err != nil {
			return fmt.Errorf("--size: %w", err)
		}
		req.Size = n
		l, err := c.GetMemory(ctx, req)
		if err != nil {
			return err
		}
		switch {
		case cf.json:
			return cli.PrintJSON(l)
		case cf.quiet:
			fmt.Println(l.ID)
			return nil
		}
		printGrant(l)
		return nil
	})
	fs := cmd.Flags()
	cf.idFlag(fs, "lease", "lease")
	fs.StringVar(&size, "size", "", "bytes to lease, e.g. 64MiB (required)")
	fs.StringVar(&req.Host, "host", "", "topology host the memory is for: the nearest memory node is picked")
	cli.TTLFlag(fs, &req.TTL, "lease `duration`, positive (default: the service's, 10m)")
	fs.StringVar(&req.Rights, "rights", "", "r, w or rw (default rw)")
	fs.Float64Var(&req.MaxLatencyNs, "max-latency", 0, "largest acceptable round trip from --host, in ns")
	fs.StringVar(&req.MemoryNode, "node", "", "pin the lease to one memory node")
	fs.BoolVar(&req.Mapped, "mapped", false, "memory --host can map with loads and stores (a memory node on its machine)")
	return cmd
}

func printGrant(l *api.MemoryLease) {
	fmt.Printf("%s: %s on %s at %s (offset %d), %s, expires %s\n", l.ID, cli.Human(int64(l.CapacityBytes)), l.MemoryNode,
		l.Endpoint, l.Offset, l.Rights, l.Expires.Local().Format(time.RFC3339))
	if l.Host != "" {
		fmt.Printf("round trip from %s: %.1f ns, %d hops\n", l.Host, l.RoundTripNs, l.Hops)
	}
	if l.MapSocket != "" {
		fmt.Printf("mappable from %s through %s\n", l.Host, l.MapSocket)
	}
	fmt.Printf("token: %s\n", l.Token)
}

func leasesCmd() *cobra.Command {
	return list[api.MemoryLease]{
		cmd: &cobra.Command{
			Use:   "leases",
			Short: "list memory leases",
			Long:  "Lists the memory leases: node, size, offset, rights, state, expiry, tenant and host.",
		},
		fetch:  (*api.Client).Leases,
		header: "LEASE\tNODE\tSIZE\tOFFSET\tRIGHTS\tSTATE\tEXPIRES\tTENANT\tHOST",
		row: func(l api.MemoryLease) []string {
			return []string{l.ID, l.MemoryNode, cli.Human(int64(l.CapacityBytes)), strconv.FormatUint(l.Offset, 10),
				l.Rights, l.State, l.Expires.Local().Format(time.RFC3339), orDash(l.Tenant), orDash(l.Host)}
		},
	}.command()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func renewCmd() *cobra.Command {
	cf := &clientFlags{}
	var ttl time.Duration
	cmd := clientVerb(&cobra.Command{
		Use:   "renew LEASE [--ttl D]",
		Short: "renew a memory lease (new token and expiry)",
		Long:  "Renews a memory lease for --ttl from now (default: the service's): a new token and expiry.",
		Args:  cli.OneArg,
	}, cf, func(ctx context.Context, c *api.Client, args []string) error {
		l, err := c.RenewLease(ctx, args[0], ttl)
		if err != nil {
			return err
		}
		if cf.json {
			return cli.PrintJSON(l)
		}
		printGrant(l)
		return nil
	})
	cli.TTLFlag(cmd.Flags(), &ttl, "new `duration` from now, positive (default: the service's)")
	return cmd
}

func releaseCmd() *cobra.Command {
	cf := &clientFlags{}
	return clientVerb(&cobra.Command{
		Use:   "release LEASE...",
		Short: "release memory leases (their memory is zeroed before reuse)",
		Long:  "Releases each memory lease named; the memory node zeroes the memory before it leases it again.",
		Args:  cli.SomeArgs,
	}, cf, func(ctx context.Context, c *api.Client, args []string) error {
		var errs []error
		for _, id := range args {
			if err := c.ReleaseLease(ctx, id); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", id, err))
				continue
			}
			if !cf.json {
				fmt.Println("released", id)
			}
		}
		return errors.Join(errs...)
	})
}

func memnodesCmd() *cobra.Command {
	return list[api.MemoryNode]{
		cmd: &cobra.Command{
			Use:   "memnodes",
			Short: "list registered memory nodes",
			Long:  "Lists the registered memory nodes: endpoint, capacity, bytes leased, leases, state and blocks.",
		},
		fetch:  (*api.Client).MemoryNodes,
		header: "NODE\tENDPOINT\tCAPACITY\tLEASED\tLEASES\tSTATE\tBLOCKS",
		row: func(n api.MemoryNode) []string {
			return []string{n.ID, n.Endpoint, cli.Human(int64(n.CapacityBytes)), cli.Human(int64(n.LeasedBytes)),
				strconv.Itoa(n.Leases), onlineState(n.Online), strconv.Itoa(len(n.Links.ResourceBlocks))}
		},
	}.command()
}

// onlineState is the STATE column of the node lists.
func onlineState(online bool) string {
	if online {
		return "online"
	}
	return "offline"
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

// memnodeCmd serves pooled memory: it registers with the control plane,
// heartbeats, and serves leased regions to token holders.
func memnodeCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "memnode --addr A --capacity SIZE --control URL",
		Short: "serve pooled memory to lease holders (registers with the control plane)",
		Long: "Serves --capacity of memory over the memory protocol on --addr: it registers with the control\n" +
			"plane as a topology memory device, heartbeats, and serves leased regions to token holders\n" +
			"(docs/memory.md). With --map-socket, clients on this machine map their lease instead.",
		Args: cli.NoArgs,
	}
	fs := cmd.Flags()
	addr := fs.String("addr", "127.0.0.1:7070", "address to serve the memory protocol on")
	capacity := fs.String("capacity", "1GiB", "memory to serve")
	control := fs.String("control", os.Getenv("RACKPOOL_URL"), "control plane URL (credentials from RACKPOOL_USER / RACKPOOL_PASSWORD)")
	var caFile string
	cli.CAFileFlag(fs, &caFile)
	device := fs.String("device", "", "topology memory device this node serves (default: the first one without a node)")
	advertise := fs.String("advertise", "", "address clients should dial (default: the listening address)")
	mapSocket := fs.String("map-socket", "", "unix socket for mapped leases: local clients map their lease's memory (load/store) instead of using TCP")
	mapHosts := fs.String("map-hosts", "", "comma-separated topology hosts on this machine, whose leases may be mapped (needs --map-socket)")
	heartbeat := fs.Duration("heartbeat", 10*time.Second, "how often to re-register with the control plane (each heartbeat reports the bytes each lease has in use)")
	var verbose bool
	cli.VerboseFlag(fs, &verbose)
	cmd.RunE = func(*cobra.Command, []string) error {
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
		return serveMemnode(memnodeConfig{addr: *addr, size: size, control: *control, caFile: caFile, device: *device,
			advertise: *advertise, mapSocket: *mapSocket, mapHosts: *mapHosts, heartbeat: *heartbeat, verbose: verbose})
	}
	return cmd
}

// memnodeConfig is memnode's command line, checked.
type memnodeConfig struct {
	addr, control, caFile, device, advertise, mapSocket, mapHosts string
	size                                                          uint64
	heartbeat                                                     time.Duration
	verbose                                                       bool
}

func serveMemnode(cfg memnodeConfig) error {
	var err error
	var hosts []string
	if cfg.mapHosts != "" {
		hosts = strings.Split(cfg.mapHosts, ",")
	}
	if (cfg.mapSocket == "") != (len(hosts) == 0) {
		return errors.New("--map-socket and --map-hosts go together")
	}
	sockPath := cfg.mapSocket
	if sockPath != "" {
		if sockPath, err = filepath.Abs(sockPath); err != nil {
			return fmt.Errorf("--map-socket: %w", err)
		}
	}
	level := slog.LevelInfo
	if cfg.verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	cf := &clientFlags{url: cfg.control, caFile: cfg.caFile}
	c, err := cf.client()
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return err
	}
	endpoint := cfg.advertise
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
		return memory.NewServer(memory.ServerOptions{Node: node, Capacity: cfg.size, Key: key, Logger: log})
	}
	var srv *memory.Server
	reg := api.NodeRegistration{Device: cfg.device, Endpoint: endpoint, CapacityBytes: cfg.size, MapSocket: sockPath, MapHosts: hosts}
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
	name := cfg.device
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
			return fmt.Errorf("register with %s: %w", cfg.control, err)
		}
		if n.ID == name {
			break
		}
		name, reg.Device = n.ID, n.ID
	}
	if n.ID != name {
		l.Close()
		return fmt.Errorf("register with %s: bound to %s, then to %s", cfg.control, name, n.ID)
	}
	log.Info("memnode serving", "node", n.ID, "addr", endpoint, "capacity", cfg.size, "blocks", len(n.Links.ResourceBlocks), "control", cfg.control)
	go func() {
		t := clock.NewTicker(clock.Real{}, cfg.heartbeat)
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
