package client

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"rackpool/api"
	"rackpool/cmd/rackpool/internal/cli"
	"rackpool/internal/units"
)

// Pooled memory verbs: lease, leases, renew, release, memnodes (clients of
// the GetMemory API).

func LeaseCmd() *cobra.Command {
	cf := &Flags{}
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
		case cf.JSON:
			return cli.PrintJSON(l)
		case cf.Quiet:
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

func LeasesCmd() *cobra.Command {
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

func RenewCmd() *cobra.Command {
	cf := &Flags{}
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
		if cf.JSON {
			return cli.PrintJSON(l)
		}
		printGrant(l)
		return nil
	})
	cli.TTLFlag(cmd.Flags(), &ttl, "new `duration` from now, positive (default: the service's)")
	return cmd
}

func ReleaseCmd() *cobra.Command {
	cf := &Flags{}
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
			if !cf.JSON {
				fmt.Println("released", id)
			}
		}
		return errors.Join(errs...)
	})
}

func MemnodesCmd() *cobra.Command {
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
