package client

import (
	"context"
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"rackpool/api"
	"rackpool/cmd/rackpool/internal/cli"
	"rackpool/internal/units"
)

// ProvisionSubscribeCmd is `rackpool provision subscribe SYSTEM [--mode
// on|dry-run] [--min SIZE] [--max SIZE]`.
func ProvisionSubscribeCmd() *cobra.Command {
	cf := &Flags{}
	var mode, minSize, maxSize string
	cmd := clientVerb(&cobra.Command{
		Use:   "subscribe SYSTEM [--mode on|dry-run] [--min SIZE] [--max SIZE]",
		Short: "opt a composed system into serve --provisioning",
		Long: "Opts a composed system into the provisioning loop of serve --provisioning: on, it grows and\n" +
			"shrinks the system's pooled memory between --min and --max; dry-run, it only explains.",
		Args: cli.OneArg,
	}, cf, func(ctx context.Context, c *api.Client, args []string) error {
		return subscribe(ctx, c, cf, args[0], mode, minSize, maxSize)
	})
	fs := cmd.Flags()
	fs.StringVar(&mode, "mode", "on", "on (grow and shrink) or dry-run (explain only)")
	fs.StringVar(&minSize, "min", "0", "least pooled memory to keep (0: none)")
	fs.StringVar(&maxSize, "max", "0", "most pooled memory to grow to (0: the quota and the pool)")
	return cmd
}

func subscribe(ctx context.Context, c *api.Client, cf *Flags, system, mode, minSize, maxSize string) error {
	wire := map[string]string{"on": "On", "dry-run": "DryRun"}[mode]
	if wire == "" {
		return fmt.Errorf("--mode %q: want on or dry-run", mode)
	}
	lo, err := units.ParseBytes(minSize)
	if err != nil {
		return fmt.Errorf("--min: %w", err)
	}
	hi, err := units.ParseBytes(maxSize)
	if err != nil {
		return fmt.Errorf("--max: %w", err)
	}
	s, err := c.Subscribe(ctx, system, wire, lo, hi)
	if err != nil {
		return err
	}
	if cf.JSON {
		return cli.PrintJSON(s)
	}
	fmt.Printf("%s subscribed: mode %s (loop applies %s)\n", s.ID, s.Mode, s.Effective)
	return nil
}

func ProvisionUnsubscribeCmd() *cobra.Command {
	return clientVerb(&cobra.Command{
		Use:   "unsubscribe SYSTEM...",
		Short: "opt composed systems out of the provisioning loop",
		Long:  "Opts each system named out of the provisioning loop; its pooled memory stays as it is.",
		Args:  cli.SomeArgs,
	}, &Flags{}, func(ctx context.Context, c *api.Client, args []string) error {
		for _, id := range args {
			if err := c.Unsubscribe(ctx, id); err != nil {
				return err
			}
		}
		return nil
	})
}

// ProvisionStatusCmd is `rackpool provision status [SYSTEM]`: every
// subscription, or one with its last decision explained.
func ProvisionStatusCmd() *cobra.Command {
	cf := &Flags{}
	return clientVerb(&cobra.Command{
		Use:   "status [SYSTEM]",
		Short: "show the provisioning loop's subscriptions, or one with its last decision explained",
		Long: "Shows the provisioning loop and every subscription with its last decision, or one system's\n" +
			"subscription with its last decision explained.",
		Args: cli.AtMostOneArg,
	}, cf, func(ctx context.Context, c *api.Client, args []string) error {
		if len(args) == 1 {
			return printSubscription(ctx, c, cf, args[0])
		}
		return printSubscriptions(ctx, c, cf)
	})
}

func printSubscription(ctx context.Context, c *api.Client, cf *Flags, system string) error {
	s, err := c.Subscription(ctx, system)
	if err != nil {
		return err
	}
	if cf.JSON {
		return cli.PrintJSON(s)
	}
	fmt.Printf("system %s: mode %s (applied: %s), pooled %s, local %s\n", s.ID, s.Mode, s.Effective,
		units.FormatBytes(s.PooledBytes), units.FormatBytes(s.LocalBytes))
	if s.Error != "" {
		fmt.Println("not decided:", s.Error)
	}
	if d := s.LastDecision; d != nil {
		fmt.Printf("last decision %s (%s, applied %v): %s\n", d.Time, d.Action, d.Applied, d.Explanation)
	}
	return nil
}

func printSubscriptions(ctx context.Context, c *api.Client, cf *Flags) error {
	p, err := c.Provisioning(ctx)
	if err != nil {
		return err
	}
	var subs []any
	var rows [][]string
	for _, m := range p.Members {
		s, err := c.Subscription(ctx, m.Last())
		if err != nil {
			return err
		}
		subs = append(subs, s)
		last := "-"
		if d := s.LastDecision; d != nil {
			last = d.Action
			if !d.Applied && d.Action != "hold" {
				last += " (not applied)"
			}
		}
		rows = append(rows, []string{s.ID, s.Mode, s.Effective, units.FormatBytes(s.PooledBytes), last, strconv.Quote(s.Error)})
	}
	if cf.JSON {
		return cli.PrintJSON(map[string]any{"Mode": p.Mode, "IntervalSeconds": p.IntervalSeconds, "Rules": p.Rules, "Subscriptions": subs})
	}
	fmt.Printf("loop %s, a step every %gs\n", p.Mode, p.IntervalSeconds)
	cli.Table("SYSTEM\tMODE\tAPPLIED\tPOOLED\tLAST\tERROR", rows)
	return nil
}
