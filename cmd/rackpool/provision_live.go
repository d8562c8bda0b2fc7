package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"rackpool/internal/units"
)

// runProvisionSubscribe is `rackpool provision subscribe SYSTEM [--mode
// on|dry-run] [--min SIZE] [--max SIZE]`.
func runProvisionSubscribe(args []string) error {
	fs, cf := newClientFlags("provision subscribe")
	mode := fs.String("mode", "on", "on (grow and shrink) or dry-run (explain only)")
	minSize := fs.String("min", "0", "least pooled memory to keep (0: none)")
	maxSize := fs.String("max", "0", "most pooled memory to grow to (0: the quota and the pool)")
	rest, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(rest) != 1 {
		return errors.New("usage: rackpool provision subscribe SYSTEM [--mode on|dry-run] [--min SIZE] [--max SIZE]")
	}
	wire := map[string]string{"on": "On", "dry-run": "DryRun"}[*mode]
	if wire == "" {
		return fmt.Errorf("--mode %q: want on or dry-run", *mode)
	}
	lo, err := units.ParseBytes(*minSize)
	if err != nil {
		return fmt.Errorf("--min: %w", err)
	}
	hi, err := units.ParseBytes(*maxSize)
	if err != nil {
		return fmt.Errorf("--max: %w", err)
	}
	c, err := cf.client()
	if err != nil {
		return err
	}
	s, err := c.Subscribe(context.Background(), rest[0], wire, lo, hi)
	if err != nil {
		return err
	}
	if cf.json {
		return printJSON(s)
	}
	fmt.Printf("%s subscribed: mode %s (loop applies %s)\n", s.ID, s.Mode, s.Effective)
	return nil
}

// runProvisionUnsubscribe is `rackpool provision unsubscribe SYSTEM...`.
func runProvisionUnsubscribe(args []string) error {
	fs, cf := newClientFlags("provision unsubscribe")
	rest, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(rest) == 0 {
		return errors.New("usage: rackpool provision unsubscribe SYSTEM [SYSTEM]")
	}
	c, err := cf.client()
	if err != nil {
		return err
	}
	for _, id := range rest {
		if err := c.Unsubscribe(context.Background(), id); err != nil {
			return err
		}
	}
	return nil
}

// runProvisionStatus is `rackpool provision status [SYSTEM]`: every
// subscription, or one with its last decision explained.
func runProvisionStatus(args []string) error {
	fs, cf := newClientFlags("provision status")
	rest, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	c, err := cf.client()
	if err != nil {
		return err
	}
	ctx := context.Background()
	if len(rest) == 1 {
		s, err := c.Subscription(ctx, rest[0])
		if err != nil {
			return err
		}
		if cf.json {
			return printJSON(s)
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
	if len(rest) > 1 {
		return errors.New("usage: rackpool provision status [SYSTEM]")
	}
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
	if cf.json {
		return printJSON(map[string]any{"Mode": p.Mode, "IntervalSeconds": p.IntervalSeconds, "Rules": p.Rules, "Subscriptions": subs})
	}
	fmt.Printf("loop %s, a step every %gs\n", p.Mode, p.IntervalSeconds)
	table("SYSTEM\tMODE\tAPPLIED\tPOOLED\tLAST\tERROR", rows)
	return nil
}
