package node

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
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"rackpool/api"
	"rackpool/cmd/rackpool/internal/cli"
	"rackpool/cmd/rackpool/internal/client"
	"rackpool/internal/clock"
	"rackpool/internal/memory"
	"rackpool/internal/units"
)

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

// MemnodeCmd serves pooled memory: it registers with the control plane,
// heartbeats, and serves leased regions to token holders.
func MemnodeCmd() *cobra.Command {
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
	cf := &client.Flags{URL: cfg.control, CAFile: cfg.caFile}
	c, err := cf.Client()
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
