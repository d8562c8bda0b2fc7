package offline

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"time"

	"github.com/spf13/cobra"

	"rackpool/cmd/rackpool/internal/cli"
	"rackpool/internal/fabric/discover"
	"rackpool/internal/topology"
)

func DiscoverCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "discover --redfish URL [--user U] [--ca-file F] [--fabric ID]... [--composition] [--host H]... [--out FILE]",
		Short: "read a Redfish service's fabrics (GET only) and write a topology file for them",
		Long: "Walks a Redfish service's fabrics with GET requests only and writes a topology file for them, with\n" +
			"a summary on stderr; the file's header notes every default and omission (docs/southbound.md).\n" +
			"A service without Fabrics that composes its own resource blocks (a vendor composer, an expansion\n" +
			"box) becomes one fabric, composed through the service when it has a CompositionService;\n" +
			"--composition reads a service so even when it has Fabrics.\n" +
			"The password of --user comes from $RACKPOOL_DISCOVER_PASSWORD.",
		Example: "  RACKPOOL_DISCOVER_PASSWORD=... rackpool discover --redfish https://fm.example --user admin --out rack.yaml\n" +
			"  rackpool discover --redfish https://box.example --host server1 --host server2   # an expansion box without Compute blocks",
		Args: cli.NoArgs,
	}
	fs := cmd.Flags()
	var o discoverConfig
	fs.StringVar(&o.url, "redfish", "", "the Redfish service's URL: https://HOST[:PORT] (its root is URL/redfish/v1)")
	fs.StringVar(&o.user, "user", "", "log in as this user (session, or Basic when the service has no sessions); password from $RACKPOOL_DISCOVER_PASSWORD")
	fs.StringVar(&o.caFile, "ca-file", "", "PEM file of CAs to trust for the service's certificate, besides the system's")
	fs.StringVar(&o.out, "out", "", "write the topology to this file (default: stdout)")
	fs.DurationVar(&o.timeout, "timeout", 5*time.Minute, "bound on the whole walk")
	fs.StringArrayVar(&o.fabrics, "fabric", nil, "read only this fabric Id (repeatable; default: all)")
	fs.BoolVar(&o.composition, "composition", false, "read the service as a vendor composer (its resource blocks and composed systems), even when it has Fabrics")
	fs.StringArrayVar(&o.hosts, "host", nil, "a host cabled to a composer that lists no Compute block (repeatable)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if o.url == "" {
			return cli.Usagef("--redfish URL is required")
		}
		return discoverTopology(o)
	}
	return cmd
}

// discoverConfig is discover's command line.
type discoverConfig struct {
	url, user, caFile, out string
	timeout                time.Duration
	fabrics, hosts         []string
	composition            bool
}

// discoverTopology reads a Redfish service's fabrics (GETs only) and
// writes a topology file for them, with a summary on stderr.
func discoverTopology(o discoverConfig) error {
	pw := os.Getenv("RACKPOOL_DISCOVER_PASSWORD")
	if o.user != "" && pw == "" {
		return errors.New("--user needs the password in $RACKPOOL_DISCOVER_PASSWORD")
	}
	g, err := discover.NewHTTPGetter(discover.HTTPOptions{URL: o.url, User: o.user, Password: pw, CAFile: o.caFile})
	if err != nil {
		return err
	}
	defer g.Close()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	res, err := discover.Walk(ctx, g.Get, discover.Options{Fabrics: o.fabrics, Composition: o.composition, Hosts: o.hosts})
	if err != nil {
		return err
	}
	fmt.Fprint(os.Stderr, res.Summary())

	draft, derr := res.Topology(discover.TopologyOptions{Source: redact(o.url), User: o.user, CAFile: o.caFile})
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
	name := o.out
	if name == "" {
		name = "discovered.yaml"
	}
	top, err := topology.Parse(name, data)
	if err != nil {
		return fmt.Errorf("the discovered topology does not compile (a bug in discover): %w", err)
	}
	if o.out == "" {
		_, err = os.Stdout.Write(data)
		return err
	}
	if err := cli.WriteFile(o.out, data, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "wrote %s: %d hosts, %d fabrics, %d devices\n", o.out, len(top.Inventory.Hosts), len(top.Inventory.Fabrics), len(top.Inventory.Devices))
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
