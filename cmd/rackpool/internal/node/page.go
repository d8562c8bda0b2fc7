package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"rackpool/api"
	"rackpool/cmd/rackpool/internal/cli"
	"rackpool/cmd/rackpool/internal/client"
	"rackpool/internal/pager"
	"rackpool/internal/pager/workload"
	"rackpool/internal/units"
)

func PageCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "page --memnode A --token T | --map-socket S --token T | --control URL [--workload sort|table]",
		Short: "run a workload on a region paged to pooled memory (userfaultfd), against all local",
		Long: "Runs a memory-bound workload once on a plain slice and once on a region paged to pooled memory\n" +
			"(userfaultfd) with a smaller local budget, and prints the slowdown and the pager's counters\n" +
			"(docs/paging.md). The memory is a lease from --control, or --memnode with --token. A lease on a memory\n" +
			"node on this machine is paged from the lease mapped into the pager (no TCP): with --control when the\n" +
			"lease can be mapped from --host (--mapped asks for such a lease; --tcp pages over TCP anyway), or\n" +
			"with --map-socket, the node's socket for mapped leases, and --token.",
		Example: "  rackpool page --control https://127.0.0.1:8080 --workload table --size 256MiB --local 25%",
		Args:    cli.NoArgs,
	}
	fs := cmd.Flags()
	var o pageConfig
	fs.StringVar(&o.control, "control", "", "control plane URL to lease the memory from (credentials from RACKPOOL_USER / RACKPOOL_PASSWORD)")
	cli.CAFileFlag(fs, &o.caFile)
	fs.StringVar(&o.memnode, "memnode", "", "memnode address to use directly, with --token, instead of --control")
	fs.StringVar(&o.token, "token", "", "capability token for --memnode or --map-socket (a lease of at least --size, rights rw)")
	fs.StringVar(&o.mapSocket, "map-socket", "", "with --token: the local socket of a memory node on this machine (memnode --map-socket) to map the lease through")
	fs.BoolVar(&o.mapped, "mapped", false, "with --control: lease memory --host can map (a memory node on this machine)")
	fs.BoolVar(&o.tcp, "tcp", false, "page over TCP even when the lease can be mapped")
	fs.StringVar(&o.host, "host", "", "with --control: topology host the memory is for")
	fs.StringVar(&o.work, "workload", "sort", "sort (a sort of --size bytes of keys) or table (--ops random updates of a --size table)")
	fs.StringVar(&o.size, "size", "64MiB", "region size")
	fs.StringVar(&o.local, "local", "25%", "local memory budget: a size, or a percentage of --size")
	fs.IntVar(&o.ops, "ops", 200000, "with --workload table: number of random updates")
	fs.IntVar(&o.prefetch, "prefetch", 0, "pages brought in per fault (a power of two up to 256; 0: the default, 8)")
	cmd.RunE = func(*cobra.Command, []string) error { return runPage(o) }
	return cmd
}

// pageConfig is page's command line.
type pageConfig struct {
	control, caFile, memnode, token, mapSocket, host, work, size, local string
	ops, prefetch                                                       int
	mapped, tcp                                                         bool
}

// runPage demonstrates paging to the pool (docs/paging.md): it runs a
// memory-bound workload once on a plain slice and once on a pager region
// backed by a memory lease with a smaller local budget, and prints the
// slowdown and the pager's counters. The same executable, started again
// by the pager with HelperEnv set, is the pager's fault-handling helper
// (see main).
func runPage(o pageConfig) error {
	regionBytes, localBytes, err := pageSizes(o.size, o.local)
	if err != nil {
		return err
	}
	if !strings.Contains(" "+strings.Join(workload.Names, " ")+" ", " "+o.work+" ") {
		return fmt.Errorf("--workload %q: want one of %s", o.work, strings.Join(workload.Names, ", "))
	}
	if o.ops <= 0 {
		return errors.New("--ops must be positive")
	}
	switch {
	case o.control != "" && (o.memnode != "" || o.mapSocket != ""):
		return errors.New("give --control or --memnode/--map-socket, not both")
	case o.memnode != "" && o.token == "":
		return errors.New("--memnode needs --token")
	case o.mapSocket != "" && o.token == "":
		return errors.New("--map-socket needs --token")
	case o.memnode == "" && o.mapSocket == "" && o.token != "":
		return errors.New("--token needs --memnode or --map-socket")
	case o.mapped && o.control == "":
		return errors.New("--mapped goes with --control (with a token, give --map-socket)")
	case o.tcp && (o.mapped || o.mapSocket != ""):
		return errors.New("--tcp pages over TCP: not with --mapped or --map-socket")
	case o.tcp && o.memnode == "" && o.control == "":
		return errors.New("--tcp needs --memnode or --control")
	case o.control == "" && o.memnode == "" && o.mapSocket == "":
		return cli.Usagef("usage: rackpool page (--control URL | --memnode ADDR --token T | --map-socket PATH --token T) [--workload sort|table] [--size SIZE] [--local SIZE|PCT%%]")
	}
	ctx := context.Background()
	endpoint, tok, sock := o.memnode, o.token, o.mapSocket
	if o.control != "" {
		cf := &client.Flags{URL: o.control, CAFile: o.caFile}
		c, err := cf.Client()
		if err != nil {
			return err
		}
		l, err := c.GetMemory(ctx, api.LeaseRequest{Size: uint64(regionBytes), Host: o.host, TTL: time.Hour, Mapped: o.mapped})
		if err != nil {
			return fmt.Errorf("lease %s of pooled memory: %w", cli.Human(regionBytes), err)
		}
		defer c.ReleaseLease(context.Background(), l.ID)
		fmt.Printf("leased %s: %s on %s at %s\n", l.ID, cli.Human(int64(l.CapacityBytes)), l.MemoryNode, l.Endpoint)
		endpoint, tok = l.Endpoint, l.Token
		if !o.tcp {
			sock = l.MapSocket
		}
		if o.mapped && sock == "" {
			return fmt.Errorf("lease %s on %s cannot be mapped from host %q", l.ID, l.MemoryNode, o.host)
		}
	}
	if sock != "" {
		fmt.Printf("paging from the lease mapped through %s\n", sock)
	} else {
		fmt.Printf("paging over TCP to %s\n", endpoint)
	}

	plain := make([]byte, regionBytes)
	t0 := time.Now()
	want, err := workload.Run(o.work, plain, o.ops, 1)
	if err != nil {
		return err
	}
	localTime := time.Since(t0)
	plain = nil

	openCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	p, err := pager.Open(openCtx, pager.Options{Size: regionBytes, Local: localBytes, Endpoint: endpoint, Token: tok,
		MapSocket: sock, Prefetch: o.prefetch, HelperArgs: []string{"page"}})
	if err != nil {
		return err
	}
	defer p.Close()
	var got uint64
	var werr error
	t0 = time.Now()
	if err := p.Access(func(r []byte) { got, werr = workload.Run(o.work, r, o.ops, 1) }); err != nil {
		return err
	}
	pagedTime := time.Since(t0)
	if werr != nil {
		return werr
	}
	if got != want {
		return fmt.Errorf("checksum %x through the pager, %x all local: the pager lost data", got, want)
	}
	s := p.Stats()
	fmt.Printf("%s of %s, local budget %s (%.0f%%)\n", o.work, cli.Human(regionBytes), cli.Human(localBytes), 100*float64(localBytes)/float64(regionBytes))
	fmt.Printf("all local: %v   paged: %v   slowdown: %.2fx   checksum %x (same)\n",
		localTime.Round(time.Millisecond), pagedTime.Round(time.Millisecond), pagedTime.Seconds()/localTime.Seconds(), got)
	fmt.Printf("faults %d (write-protect %d), fetches %d (%s), zero-filled %d, prefetched %d\n",
		s.Faults, s.WriteFaults, s.Fetches, cli.Human(int64(s.Fetched)), s.ZeroFills, s.Prefetched)
	fmt.Printf("evictions %d, writebacks %d (%s), fault latency p50 <%v p99 <%v\n",
		s.Evictions, s.Writebacks, cli.Human(int64(s.Written)), s.LatencyQuantile(0.5), s.LatencyQuantile(0.99))
	return nil
}

// pageSizes parses --size and --local (a size or a percentage of --size,
// rounded down to whole pages).
func pageSizes(size, local string) (int64, int64, error) {
	ps := int64(os.Getpagesize())
	n, err := units.ParsePositive(size)
	if err != nil {
		return 0, 0, fmt.Errorf("--size: %w", err)
	}
	if n%uint64(ps) != 0 || n > 1<<40 {
		return 0, 0, fmt.Errorf("--size %s: want a multiple of the page size (%d bytes) up to 1TiB", size, ps)
	}
	region := int64(n)
	var l int64
	if pct, ok := strings.CutSuffix(local, "%"); ok {
		f, err := strconv.ParseFloat(pct, 64)
		if err != nil || !(f > 0 && f <= 100) {
			return 0, 0, fmt.Errorf("--local %s: want a percentage in (0, 100]", local)
		}
		l = int64(float64(region)*f/100) / ps * ps
		if l == 0 {
			return 0, 0, fmt.Errorf("--local %s of %s is less than a page", local, size)
		}
	} else {
		m, err := units.ParsePositive(local)
		if err != nil {
			return 0, 0, fmt.Errorf("--local: %w (a size, or a percentage such as 25%%)", err)
		}
		if m%uint64(ps) != 0 {
			return 0, 0, fmt.Errorf("--local %s: want a multiple of the page size (%d bytes)", local, ps)
		}
		l = int64(m)
	}
	if l > region {
		return 0, 0, fmt.Errorf("--local %s is more than --size %s", local, size)
	}
	return region, l, nil
}
