package client

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"rackpool/api"
	"rackpool/cmd/rackpool/internal/cli"
)

// Pooled drive verbs: blocknodes, drives, drive (show, token, release;
// connect, which serves a drive on the node, is added by the caller).

func BlocknodesCmd() *cobra.Command {
	return list[api.BlockNode]{
		cmd: &cobra.Command{
			Use:   "blocknodes",
			Short: "list registered blocknodes",
			Long:  "Lists the registered blocknodes: NBD endpoint, state, drives served, most drives, operations.",
		},
		fetch:  (*api.Client).BlockNodes,
		header: "BLOCKNODE\tENDPOINT\tSTATE\tDRIVES\tMAX\tOPS",
		row: func(n api.BlockNode) []string {
			return []string{n.ID, n.Endpoint, onlineState(n.Online), strconv.Itoa(len(n.Links.Drives)), strconv.Itoa(n.MaxDrives),
				strconv.FormatUint(n.Load.Operations, 10)}
		},
	}.command()
}

func DrivesCmd() *cobra.Command {
	return list[api.Drive]{
		cmd: &cobra.Command{
			Use:   "drives",
			Short: "list pooled drives: state, blocknode, epoch",
			Long:  "Lists the pooled drives: size, state, the blocknode serving each at its ownership epoch, the writer.",
		},
		fetch:  (*api.Client).Drives,
		header: "DRIVE\tKIND\tSIZE\tSTATE\tBLOCKNODE\tENDPOINT\tEPOCH\tWRITER\tREASON",
		row: func(d api.Drive) []string {
			return []string{d.ID, d.Kind, cli.Human(d.CapacityBytes), d.State, orDash(d.BlockNode), orDash(d.Endpoint),
				strconv.FormatUint(d.Epoch, 10), writerColumn(d), orDash(d.Reason)}
		},
	}.command()
}

// driveCmd is `rackpool drive show|token|connect|release`.
// DriveCmd is the drive verb with its sub-verbs show, token and release,
// and those given (drive connect, which runs on the node).
func DriveCmd(more ...*cobra.Command) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "drive show|token|connect|release DRIVE",
		Short: "where a drive is served, a token for it, serve it locally over NBD (connect --listen), or give its write reservation back",
		Long: "Works on one pooled drive: where it is served (show), a capability token for it (token), serving it\n" +
			"on this machine over NBD and following it from blocknode to blocknode (connect), or giving its\n" +
			"write reservation back (release). See docs/storage.md.",
		Args: cobra.ArbitraryArgs,
		RunE: cli.GroupRun,
		// The usage line names the sub-verbs, whose flags are their own.
		DisableFlagsInUseLine: true,
	}
	cmd.AddCommand(driveShowCmd(), driveTokenCmd(), driveReleaseCmd())
	cmd.AddCommand(more...)
	return cmd
}

func driveShowCmd() *cobra.Command {
	cf := &Flags{}
	return clientVerb(&cobra.Command{
		Use:   "show DRIVE",
		Short: "show where a drive is served, and its writer",
		Long:  "Shows a pooled drive: size, kind, model, state, the blocknode serving it and its epoch, its writer.",
		Args:  cli.OneArg,
	}, cf, func(ctx context.Context, c *api.Client, args []string) error {
		d, err := c.Drive(ctx, args[0])
		if err != nil {
			return err
		}
		if cf.JSON {
			return cli.PrintJSON(d)
		}
		fmt.Printf("%s: %s %s, %s, %s", d.ID, cli.Human(d.CapacityBytes), d.Kind, d.Model, d.State)
		if d.BlockNode != "" {
			fmt.Printf(" on blocknode %s at %s (epoch %d)", d.BlockNode, d.Endpoint, d.Epoch)
		}
		fmt.Println()
		if w := d.WriteReservation; w != nil {
			fmt.Printf("written by %s since %s (write reservation generation %d)\n", w.Holder, w.Since.Local().Format(time.RFC3339), w.Generation)
		}
		if d.Reason != "" {
			fmt.Println(d.Reason)
		}
		return nil
	})
}

func driveTokenCmd() *cobra.Command {
	cf := &Flags{}
	var req api.DriveConnect
	cmd := clientVerb(&cobra.Command{
		Use:   "token DRIVE [--rights rw] [--ttl D] [--holder NAME] [--preempt]",
		Short: "a capability token for a drive, and its NBD URI",
		Long: "Asks for a capability token for the drive: the blocknode serving it, its epoch, the token's rights\n" +
			"and expiry, and the NBD URI an NBD client (qemu-io, nbdcopy, fio) connects to. With write rights\n" +
			"the holder takes the drive's write reservation.",
		Example: "  rackpool drive token ssd1 --rights r",
		Args:    cli.OneArg,
	}, cf, func(ctx context.Context, c *api.Client, args []string) error {
		g, err := c.ConnectDrive(ctx, args[0], req)
		if err != nil {
			return err
		}
		if cf.JSON {
			return cli.PrintJSON(g)
		}
		fmt.Printf("%s: blocknode %s at %s, epoch %d, %s, expires %s", g.Drive, g.BlockNode, g.Endpoint, g.Epoch, g.Rights,
			g.Expires.Local().Format(time.RFC3339))
		if g.Holder != "" {
			fmt.Printf(", writer %s (generation %d)", g.Holder, g.WriteGeneration)
		}
		fmt.Println()
		fmt.Println(NBDURI(g.Endpoint, g.ExportName))
		return nil
	})
	fs := cmd.Flags()
	fs.StringVar(&req.Rights, "rights", "rw", "r, w or rw")
	cli.TTLFlag(fs, &req.TTL, "token lifetime, a positive `duration` (default: the service's, 10m)")
	fs.StringVar(&req.Holder, "holder", "", "with write rights, the drive's write reservation holder (default: ACCOUNT@ADDRESS, as the service sees this client)")
	fs.BoolVar(&req.Preempt, "preempt", false, "take the write reservation over from its holder, fencing its writes")
	return cmd
}

// writerColumn is the WRITER column of `rackpool drives`.
func writerColumn(d api.Drive) string {
	if d.WriteReservation == nil {
		return "-"
	}
	return d.WriteReservation.Holder
}

// driveReleaseCmd is `rackpool drive release DRIVE [--holder NAME]`: it
// gives a write reservation back.
func driveReleaseCmd() *cobra.Command {
	cf := &Flags{}
	var holder string
	cmd := clientVerb(&cobra.Command{
		Use:   "release DRIVE [--holder NAME]",
		Short: "give a drive's write reservation back",
		Long:  "Gives the drive's write reservation back, so that another holder may write.",
		Args:  cli.OneArg,
	}, cf, func(ctx context.Context, c *api.Client, args []string) error {
		d, err := c.ReleaseDrive(ctx, args[0], holder)
		if err != nil {
			return err
		}
		if cf.JSON {
			return cli.PrintJSON(d)
		}
		fmt.Printf("%s: no writer\n", d.ID)
		return nil
	})
	cmd.Flags().StringVar(&holder, "holder", "", "the reservation's holder (default: the one drive token gives this account, ACCOUNT@ADDRESS)")
	return cmd
}

// NBDEndpointScheme is the prefix of the endpoint a blocknode serving TLS
// advertises: its clients learn from the endpoint that they must use TLS
// (the scheme of an NBD URI that requires it).
const NBDEndpointScheme = "nbds://"

// NBDURI is the NBD URI of export at a blocknode's endpoint.
func NBDURI(endpoint, export string) string {
	if strings.HasPrefix(endpoint, NBDEndpointScheme) {
		return endpoint + "/" + export
	}
	return "nbd://" + endpoint + "/" + export
}
