// Package client holds the client verbs of rackpool: those that talk to
// the control plane's API and print what it answers as tables, or as JSON
// with --json (blocks, compose, lease, drives, audit, ...). Flags is what
// they share (--url, --ca-file, --json, -q) and how they reach the
// service; list is the shape of a list verb. The node processes use Flags
// to reach the control plane too.
package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"rackpool/api"
	"rackpool/cmd/rackpool/internal/cli"
)

// Flags are the flags every client verb shares: where the service
// is, whom to trust, and how to print.
type Flags struct {
	URL    string
	CAFile string
	JSON   bool
	Quiet  bool // --quiet, on verbs that registered it with idFlag
}

// Register adds --url, --ca-file and --json to fs.
func (cf *Flags) Register(fs *pflag.FlagSet) {
	def := os.Getenv("RACKPOOL_URL")
	if def == "" {
		def = "https://127.0.0.1:8080"
	}
	fs.StringVar(&cf.URL, "url", def, "rackpool service URL")
	cli.CAFileFlag(fs, &cf.CAFile)
	fs.BoolVar(&cf.JSON, "json", false, "print JSON instead of tables")
}

// idFlag adds -q/--quiet to a verb that creates or changes one thing: it
// then prints that thing's ID alone, for a shell variable
// (SYS=$(rackpool compose -q ...)).
func (cf *Flags) idFlag(fs *pflag.FlagSet, verb, what string) {
	fs.BoolVarP(&cf.Quiet, "quiet", "q", false, "print only the "+what+"'s ID (for scripts: ID=$(rackpool "+verb+" -q ...))")
}

// clientVerb makes cmd a client verb: the shared flags, and a run that
// gets the service's client once the command line has parsed.
func clientVerb(cmd *cobra.Command, cf *Flags, run func(ctx context.Context, c *api.Client, args []string) error) *cobra.Command {
	cf.Register(cmd.Flags())
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		c, err := cf.Client()
		if err != nil {
			return err
		}
		return run(cmd.Context(), c, args)
	}
	return cmd
}

// list is a list verb: it fetches items, keeps those its flags select, and
// prints them as a table or, with --json, as JSON.
type list[T any] struct {
	cmd    *cobra.Command
	fetch  func(*api.Client, context.Context) ([]T, error)
	keep   func(T) bool // nil: every item
	header string       // tab-separated columns
	row    func(T) []string
}

func (l list[T]) command() *cobra.Command {
	cf := &Flags{}
	if l.cmd.Args == nil {
		l.cmd.Args = cli.NoArgs
	}
	return clientVerb(l.cmd, cf, func(ctx context.Context, c *api.Client, _ []string) error {
		items, err := l.fetch(c, ctx)
		if err != nil {
			return err
		}
		if l.keep != nil {
			items = slices.DeleteFunc(items, func(x T) bool { return !l.keep(x) })
		}
		if cf.JSON {
			return cli.PrintJSON(items)
		}
		rows := make([][]string, 0, len(items))
		for _, x := range items {
			rows = append(rows, l.row(x))
		}
		cli.Table(l.header, rows)
		return nil
	})
}

// Client is the service's client at --url, trusting --ca-file, as
// $RACKPOOL_USER (default Administrator) with $RACKPOOL_PASSWORD.
func (cf *Flags) Client() (*api.Client, error) {
	user := os.Getenv("RACKPOOL_USER")
	if user == "" {
		user = "Administrator"
	}
	pass := os.Getenv("RACKPOOL_PASSWORD")
	if pass == "" {
		return nil, errors.New("set RACKPOOL_PASSWORD (the Administrator password printed by the first `rackpool serve`, or the RACKPOOL_ADMIN_PASSWORD it was started with)")
	}
	hc, err := httpClient(cf.CAFile)
	if err != nil {
		return nil, err
	}
	c := api.New(cf.URL, user, pass)
	c.HTTP = hc
	return c, nil
}

func BlocksCmd() *cobra.Command {
	var kind, state string
	l := list[api.Block]{
		cmd: &cobra.Command{
			Use:   "blocks [--kind K] [--state S]",
			Short: "list resource blocks with their composition state",
			Long: "Lists the resource blocks (hosts and pooled devices): kind, model, capacity, where they sit, their\n" +
				"composition state and health, and the systems they are composed into.",
			Example: "  rackpool blocks --kind gpu --state Unused",
		},
		fetch: (*api.Client).Blocks,
		keep: func(b api.Block) bool {
			return (kind == "" || strings.EqualFold(b.Oem.Rackpool.Kind, kind)) &&
				(state == "" || strings.EqualFold(b.CompositionStatus.CompositionState, state))
		},
		header: "BLOCK\tKIND\tMODEL\tCAPACITY\tWHERE\tSTATE\tHEALTH\tUSE\tSYSTEMS",
		row: func(b api.Block) []string {
			var systems []string
			for _, s := range b.Links.ComputerSystems {
				systems = append(systems, s.Last())
			}
			where := b.Oem.Rackpool.Fabric
			if b.Oem.Rackpool.Drawer != "" {
				where += fmt.Sprintf("/%s/slot%d", b.Oem.Rackpool.Drawer, b.Oem.Rackpool.Slot)
			}
			return []string{b.ID, b.Oem.Rackpool.Kind, b.Oem.Rackpool.Model, cli.Human(b.Oem.Rackpool.CapacityBytes), orDash(where),
				b.CompositionStatus.CompositionState, b.Status.Health,
				fmt.Sprintf("%d/%d", b.CompositionStatus.NumberOfCompositions, b.CompositionStatus.MaxCompositions), strings.Join(systems, ",")}
		},
	}
	cmd := l.command()
	cmd.Flags().StringVar(&kind, "kind", "", "only blocks of this kind (compute, gpu, fpga, nvme, ssd, hdd, nic, memory)")
	cmd.Flags().StringVar(&state, "state", "", "only blocks in this state (Unused, Composed, ...)")
	return cmd
}

func ZonesCmd() *cobra.Command {
	return list[api.Zone]{
		cmd: &cobra.Command{
			Use:   "zones",
			Short: "list resource zones (what each host can be composed with)",
			Long:  "Lists the resource zones: the blocks each host can be composed with, counted by name.",
		},
		fetch:  (*api.Client).Zones,
		header: "ZONE\tBLOCKS\tBY NAME\tDESCRIPTION",
		row: func(z api.Zone) []string {
			kinds := map[string]int{}
			for _, b := range z.Links.ResourceBlocks {
				id := b.Last()
				kinds[strings.TrimRightFunc(strings.SplitN(id, "-b", 2)[0], func(r rune) bool { return r >= '0' && r <= '9' })]++
			}
			var parts []string
			for _, k := range slices.Sorted(maps.Keys(kinds)) {
				parts = append(parts, fmt.Sprintf("%d %s", kinds[k], k))
			}
			return []string{z.ID, strconv.Itoa(len(z.Links.ResourceBlocks)), strings.Join(parts, ", "), z.Description}
		},
	}.command()
}

func SystemsCmd() *cobra.Command {
	var all bool
	cmd := list[api.System]{
		cmd: &cobra.Command{
			Use:   "systems [--all]",
			Short: "list composed systems",
			Long:  "Lists the composed systems (with --all, the physical hosts too): state, host, memory and blocks.",
		},
		fetch:  (*api.Client).Systems,
		keep:   func(s api.System) bool { return all || s.SystemType == "Composed" },
		header: "SYSTEM\tNAME\tSTATE\tHOST\tMEMORY GiB\tBLOCKS",
		row: func(s api.System) []string {
			var blocks []string
			for _, b := range s.Links.ResourceBlocks {
				blocks = append(blocks, b.Last())
			}
			state := s.Oem.Rackpool.CompositionState
			if s.SystemType != "Composed" {
				state = "Physical"
			}
			return []string{s.ID, s.Name, state, s.Oem.Rackpool.Host, fmt.Sprintf("%.0f", s.MemorySummary.TotalSystemMemoryGiB), strings.Join(blocks, ",")}
		},
	}.command()
	cmd.Flags().BoolVar(&all, "all", false, "include physical hosts")
	return cmd
}

// printSystem prints s block by block, as JSON (--json) or as its ID
// alone (--quiet).
func (cf *Flags) printSystem(s *api.System) error {
	switch {
	case cf.JSON:
		return cli.PrintJSON(s)
	case cf.Quiet:
		fmt.Println(s.ID)
		return nil
	}
	r := s.Oem.Rackpool
	fmt.Printf("%s (%s) %s on %s, version %d, %.0f GiB memory\n", s.ID, s.Name, r.CompositionState, r.Host, r.Version, s.MemorySummary.TotalSystemMemoryGiB)
	var rows [][]string
	for _, b := range r.Blocks {
		rtt, hops := "-", "-"
		if b.Kind != "compute" {
			rtt, hops = fmt.Sprintf("%.1f", b.RoundTripNs), strconv.Itoa(b.Hops)
		}
		port := b.HostPort
		if port == "" {
			port = "-"
		}
		rows = append(rows, []string{b.ID, b.Kind, port, rtt, hops})
	}
	cli.Table("BLOCK\tKIND\tHOST PORT\tRTT ns\tHOPS", rows)
	return nil
}

func ShowCmd() *cobra.Command {
	cf := &Flags{}
	return clientVerb(&cobra.Command{
		Use:   "show SYSTEM",
		Short: "show one composed system, block by block",
		Long:  "Shows one composed system block by block: kind, host port, round trip and hops of each.",
		Args:  cli.OneArg,
	}, cf, func(ctx context.Context, c *api.Client, args []string) error {
		s, err := c.System(ctx, args[0])
		if err != nil {
			return err
		}
		return cf.printSystem(s)
	})
}

// composeRequest holds the flags of compose and explain.
type composeRequest struct {
	req   api.ComposeRequest
	needs []string
}

func (r *composeRequest) register(fs *pflag.FlagSet) {
	fs.StringVar(&r.req.Name, "name", "", "name of the composed system")
	fs.StringVar(&r.req.Host, "host", "", "host to compose on (default: the scheduler chooses)")
	fs.StringVar(&r.req.Zone, "zone", "", "confine placement to a topology zone")
	fs.StringVar(&r.req.Affinity, "affinity", "", "same-drawer or same-switch")
	fs.IntVar(&r.req.MinCores, "min-cores", 0, "host needs at least this many cores")
	fs.IntVar(&r.req.MinMemoryGiB, "min-memory", 0, "host needs at least this much local memory (GiB)")
	needFlag(fs, &r.needs)
}

// build completes the request with the blocks named in args and the
// needs parsed (a PreRunE: the command line is checked before the client
// is made).
func (r *composeRequest) build(_ *cobra.Command, args []string) error {
	r.req.Blocks = args
	var err error
	if r.req.Needs, err = parseNeeds(r.needs); err != nil {
		return err
	}
	if len(r.req.Blocks) == 0 && len(r.req.Needs) == 0 && r.req.Host == "" {
		return cli.Usagef("name blocks, --need or --host (see rackpool help)")
	}
	return nil
}

// needFlag adds --need, repeatable.
func needFlag(fs *pflag.FlagSet, needs *[]string) {
	fs.StringArrayVar(needs, "need", nil, "a need `SPEC` (repeatable), e.g. \"2 gpu model=V100\" or \"64GiB memory\"")
}

func parseNeeds(specs []string) ([]api.Need, error) {
	var ns []api.Need
	for _, spec := range specs {
		n, err := api.ParseNeed(spec)
		if err != nil {
			return nil, err
		}
		ns = append(ns, n)
	}
	return ns, nil
}

const composeLong = `Composes a logical system: from the blocks named (specific composition), or from
needs the scheduler places (constrained composition), on --host or a host it chooses.
A need SPEC is "COUNT KIND [key=value...]" or "SIZE memory"; the keys are model,
capacity, max-latency (ns) and any attribute of the blocks. A request that does not
fit is refused with the scheduler's reasons, host by host.`

const composeExample = `  SYS=$(rackpool compose -q --need "2 gpu model=V100" --need "64GiB memory" --need "1 nvme capacity=3TB")
  rackpool compose --host host3 hdd1 hdd2 ssd1`

func ComposeCmd() *cobra.Command {
	cf, r := &Flags{}, &composeRequest{}
	cmd := clientVerb(&cobra.Command{
		Use:     "compose [-q] [--host H] [--need SPEC]... [BLOCK...]",
		Short:   "compose a system from specific blocks or by need",
		Long:    composeLong,
		Example: composeExample,
		PreRunE: r.build,
	}, cf, func(ctx context.Context, c *api.Client, _ []string) error {
		s, err := c.Compose(ctx, r.req)
		if err != nil {
			return explainError(err)
		}
		return cf.printSystem(s)
	})
	cf.idFlag(cmd.Flags(), "compose", "new system")
	r.register(cmd.Flags())
	return cmd
}

// explainError adds the scheduler's rejections to an error.
func explainError(err error) error {
	var ae *api.Error
	if !errors.As(err, &ae) || len(ae.Oem) == 0 {
		return err
	}
	var detail struct {
		Rejections []struct{ Host, Block, Reason, Detail string }
	}
	if json.Unmarshal(ae.Oem, &detail) != nil || len(detail.Rejections) == 0 {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%s)\n", ae.Message, ae.MessageID)
	for _, r := range detail.Rejections {
		fmt.Fprintf(&b, "  %-8s %-18s %s\n", r.Host, r.Reason, r.Detail)
	}
	return errors.New(strings.TrimRight(b.String(), "\n"))
}

func ExplainCmd() *cobra.Command {
	cf, r := &Flags{}, &composeRequest{}
	cmd := clientVerb(&cobra.Command{
		Use:   "explain [same as compose]",
		Short: "say where a request would go, or why it does not fit",
		Long: "Asks the scheduler where a compose request would go, changing nothing: the blocks with their\n" +
			"round trips, or why it does not fit, host by host, now or on this topology at all.",
		Example: "  rackpool explain --host host4 gpu1",
		PreRunE: r.build,
	}, cf, func(ctx context.Context, c *api.Client, _ []string) error {
		e, err := c.Explain(ctx, r.req)
		if err != nil {
			return err
		}
		if cf.JSON {
			return cli.PrintJSON(e)
		}
		printExplanation(e)
		return nil
	})
	r.register(cmd.Flags())
	return cmd
}

func printExplanation(e *api.Explanation) {
	if e.Fits {
		fmt.Printf("fits on %s, total round trip %.1f ns:\n", e.Host, e.TotalRoundTripNs)
		var rows [][]string
		for _, b := range e.Blocks {
			rows = append(rows, []string{b.ID, b.Kind, b.HostPort, fmt.Sprintf("%.1f", b.RoundTripNs), strconv.Itoa(b.Hops)})
		}
		cli.Table("BLOCK\tKIND\tHOST PORT\tRTT ns\tHOPS", rows)
		return
	}
	when := "now (blocks in use)"
	if e.Details.CanNeverFit {
		when = "on this topology, even when empty"
	}
	fmt.Printf("does not fit %s:\n", when)
	var rows [][]string
	for _, r := range e.Details.Rejections {
		rows = append(rows, []string{r.Host, r.Reason, r.Detail})
	}
	cli.Table("HOST\tREASON\tDETAIL", rows)
}

func DecomposeCmd() *cobra.Command {
	cf := &Flags{}
	return clientVerb(&cobra.Command{
		Use:   "decompose SYSTEM...",
		Short: "decompose systems, returning their blocks to the pools",
		Long:  "Decomposes each system named: its devices are detached and its blocks return to the pools.",
		Args:  cli.SomeArgs,
	}, cf, func(ctx context.Context, c *api.Client, args []string) error {
		var errs []error
		for _, id := range args {
			if err := c.Decompose(ctx, id); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", id, err))
				continue
			}
			if !cf.JSON {
				fmt.Println("decomposed", id)
			}
		}
		return errors.Join(errs...)
	})
}

func ExpandCmd() *cobra.Command {
	cf := &Flags{}
	var needs []string
	cmd := clientVerb(&cobra.Command{
		Use:     "expand SYSTEM [--need SPEC]... [BLOCK...]",
		Short:   "add blocks to a composed system",
		Long:    "Adds the blocks named, or blocks the scheduler places for each --need, to a composed system.",
		Example: "  rackpool expand $SYS --need \"1 fpga\"",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 1 || len(args) == 1 && len(needs) == 0 {
				return cli.Usagef("usage: %s", cmd.UseLine())
			}
			return nil
		},
	}, cf, func(ctx context.Context, c *api.Client, args []string) error {
		ns, err := parseNeeds(needs)
		if err != nil {
			return err
		}
		s, err := c.Expand(ctx, args[0], args[1:], ns, nil)
		if err != nil {
			return explainError(err)
		}
		return cf.printSystem(s)
	})
	cf.idFlag(cmd.Flags(), "expand", "system")
	needFlag(cmd.Flags(), &needs)
	return cmd
}

// ShrinkCmd removes blocks with the Rackpool.Shrink action: one update,
// audited as a Shrink.
func ShrinkCmd() *cobra.Command {
	cf := &Flags{}
	cmd := clientVerb(&cobra.Command{
		Use:   "shrink SYSTEM BLOCK...",
		Short: "remove blocks from a composed system",
		Long:  "Removes the blocks named from a composed system, in one update (audited as a Shrink).",
		Args:  cli.TwoOrMore,
	}, cf, func(ctx context.Context, c *api.Client, args []string) error {
		var s api.System
		if _, err := c.Do(ctx, "POST", "/redfish/v1/Systems/"+url.PathEscape(args[0])+"/Actions/Oem/Rackpool.Shrink",
			map[string]any{"Blocks": args[1:]}, &s); err != nil {
			return err
		}
		return cf.printSystem(&s)
	})
	cf.idFlag(cmd.Flags(), "shrink", "system")
	return cmd
}

// httpClient is the HTTP client of the client verbs: it trusts the
// system's roots and caFile, or by default the CA api.CAFile finds.
func httpClient(caFile string) (*http.Client, error) {
	if caFile == "" {
		caFile = api.CAFile()
	}
	return api.HTTPClient(caFile)
}
