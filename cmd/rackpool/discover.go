package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"time"

	"rackpool/internal/fabric/discover"
	"rackpool/internal/topology"
)

// runDiscover reads a Redfish service's fabrics (GETs only) and writes a
// topology file for them, with a summary on stderr.
func runDiscover(args []string) error {
	fs := flag.NewFlagSet("discover", flag.ContinueOnError)
	rf := fs.String("redfish", "", "the Redfish service's URL: https://HOST[:PORT] (its root is URL/redfish/v1)")
	user := fs.String("user", "", "log in as this user (session, or Basic when the service has no sessions); password from $RACKPOOL_DISCOVER_PASSWORD")
	caFile := fs.String("ca-file", "", "PEM file of CAs to trust for the service's certificate, besides the system's")
	out := fs.String("out", "", "write the topology to this file (default: stdout)")
	timeout := fs.Duration("timeout", 5*time.Minute, "bound on the whole walk")
	var fabrics multi
	fs.Var(&fabrics, "fabric", "read only this fabric Id (repeatable; default: all)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: rackpool discover --redfish URL [--user U] [--ca-file F] [--fabric ID]... [--out FILE]")
		fs.PrintDefaults()
	}
	rest, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return fmt.Errorf("unexpected arguments %q", rest)
	}
	if *rf == "" {
		fs.Usage()
		return errors.New("--redfish URL is required")
	}
	pw := os.Getenv("RACKPOOL_DISCOVER_PASSWORD")
	if *user != "" && pw == "" {
		return errors.New("--user needs the password in $RACKPOOL_DISCOVER_PASSWORD")
	}
	g, err := discover.NewHTTPGetter(discover.HTTPOptions{URL: *rf, User: *user, Password: pw, CAFile: *caFile})
	if err != nil {
		return err
	}
	defer g.Close()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	res, err := discover.Walk(ctx, g.Get, discover.Options{Fabrics: fabrics})
	if err != nil {
		return err
	}
	fmt.Fprint(os.Stderr, res.Summary())

	draft, derr := res.Topology(discover.TopologyOptions{Source: redact(*rf)})
	if draft == nil {
		return derr
	}
	var inTop int
	for _, a := range draft.Attachments {
		if a.InTopology {
			inTop++
		}
	}
	fmt.Fprintf(os.Stderr, "%d attachments (%d within the topology), %d notes on defaults and omissions (in the file's header)\n",
		len(draft.Attachments), inTop, len(draft.Notes))
	if derr != nil {
		return derr
	}
	data, err := draft.YAML()
	if err != nil {
		return err
	}
	name := *out
	if name == "" {
		name = "discovered.yaml"
	}
	top, err := topology.Parse(name, data)
	if err != nil {
		return fmt.Errorf("the discovered topology does not compile (a bug in discover): %w", err)
	}
	if *out == "" {
		_, err = os.Stdout.Write(data)
		return err
	}
	if err := writeFile(*out, data, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "wrote %s: %d hosts, %d fabrics, %d devices\n", *out, len(top.Inventory.Hosts), len(top.Inventory.Fabrics), len(top.Inventory.Devices))
	return nil
}

// redact drops credentials from a URL for the file's header.
func redact(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "the service"
	}
	u.User = nil
	return u.String()
}
