package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"rackpool/api"
)

// clientFlags are shared by the client verbs.
type clientFlags struct {
	url    string
	caFile string
	json   bool
	quiet  bool // --quiet, on verbs that registered it with idFlag
}

func newClientFlags(name string) (*flag.FlagSet, *clientFlags) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	cf := &clientFlags{}
	def := os.Getenv("RACKPOOL_URL")
	if def == "" {
		def = "https://127.0.0.1:8080"
	}
	fs.StringVar(&cf.url, "url", def, "rackpool service URL")
	caFlag(fs, &cf.caFile)
	fs.BoolVar(&cf.json, "json", false, "print JSON instead of tables")
	return fs, cf
}

// idFlag adds -q/--quiet to a verb that creates or changes one thing: it
// then prints that thing's ID alone, for a shell variable
// (SYS=$(rackpool compose -q ...)).
func (cf *clientFlags) idFlag(fs *flag.FlagSet, what string) {
	usage := "print only the " + what + "'s ID (for scripts: ID=$(rackpool " + fs.Name() + " -q ...))"
	fs.BoolVar(&cf.quiet, "quiet", false, usage)
	fs.BoolVar(&cf.quiet, "q", false, "short for --quiet")
}

func (cf *clientFlags) client() (*api.Client, error) {
	user := os.Getenv("RACKPOOL_USER")
	if user == "" {
		user = "Administrator"
	}
	pass := os.Getenv("RACKPOOL_PASSWORD")
	if pass == "" {
		return nil, errors.New("set RACKPOOL_PASSWORD (the Administrator password printed by the first `rackpool serve`, or the RACKPOOL_ADMIN_PASSWORD it was started with)")
	}
	hc, err := httpClient(cf.caFile)
	if err != nil {
		return nil, err
	}
	c := api.New(cf.url, user, pass)
	c.HTTP = hc
	return c, nil
}

func printJSON(v any) error {
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func table(header string, rows [][]string) {
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	tw.Flush()
}

func human(n int64) string {
	if n <= 0 {
		return "-"
	}
	units := []string{"B", "KB", "MB", "GB", "TB", "PB"}
	f, i := float64(n), 0
	if n%(1<<30) == 0 {
		return fmt.Sprintf("%dGiB", n>>30)
	}
	if n%(1<<20) == 0 {
		return fmt.Sprintf("%dMiB", n>>20)
	}
	for f >= 1000 && i < len(units)-1 {
		f /= 1000
		i++
	}
	return strconv.FormatFloat(f, 'f', -1, 64) + units[i]
}

func runBlocks(args []string) error {
	fs, cf := newClientFlags("blocks")
	kind := fs.String("kind", "", "only blocks of this kind (compute, gpu, fpga, nvme, ssd, hdd, nic, memory)")
	state := fs.String("state", "", "only blocks in this state (Unused, Composed, ...)")
	if _, err := parseInterspersed(fs, args); err != nil {
		return err
	}
	c, err := cf.client()
	if err != nil {
		return err
	}
	blocks, err := c.Blocks(context.Background())
	if err != nil {
		return err
	}
	var out []api.Block
	for _, b := range blocks {
		if (*kind == "" || strings.EqualFold(b.Oem.Rackpool.Kind, *kind)) && (*state == "" || strings.EqualFold(b.CompositionStatus.CompositionState, *state)) {
			out = append(out, b)
		}
	}
	if cf.json {
		return printJSON(out)
	}
	var rows [][]string
	for _, b := range out {
		var systems []string
		for _, s := range b.Links.ComputerSystems {
			systems = append(systems, s.Last())
		}
		where := b.Oem.Rackpool.Fabric
		if b.Oem.Rackpool.Drawer != "" {
			where += fmt.Sprintf("/%s/slot%d", b.Oem.Rackpool.Drawer, b.Oem.Rackpool.Slot)
		}
		if where == "" {
			where = "-"
		}
		rows = append(rows, []string{b.ID, b.Oem.Rackpool.Kind, b.Oem.Rackpool.Model, human(b.Oem.Rackpool.CapacityBytes), where,
			b.CompositionStatus.CompositionState, b.Status.Health, fmt.Sprintf("%d/%d", b.CompositionStatus.NumberOfCompositions, b.CompositionStatus.MaxCompositions),
			strings.Join(systems, ",")})
	}
	table("BLOCK\tKIND\tMODEL\tCAPACITY\tWHERE\tSTATE\tHEALTH\tUSE\tSYSTEMS", rows)
	return nil
}

func runZones(args []string) error {
	fs, cf := newClientFlags("zones")
	if _, err := parseInterspersed(fs, args); err != nil {
		return err
	}
	c, err := cf.client()
	if err != nil {
		return err
	}
	zones, err := c.Zones(context.Background())
	if err != nil {
		return err
	}
	if cf.json {
		return printJSON(zones)
	}
	var rows [][]string
	for _, z := range zones {
		kinds := map[string]int{}
		for _, b := range z.Links.ResourceBlocks {
			id := b.Last()
			kinds[strings.TrimRightFunc(strings.SplitN(id, "-b", 2)[0], func(r rune) bool { return r >= '0' && r <= '9' })]++
		}
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(kinds)) {
			parts = append(parts, fmt.Sprintf("%d %s", kinds[k], k))
		}
		rows = append(rows, []string{z.ID, strconv.Itoa(len(z.Links.ResourceBlocks)), strings.Join(parts, ", "), z.Description})
	}
	table("ZONE\tBLOCKS\tBY NAME\tDESCRIPTION", rows)
	return nil
}

func runSystems(args []string) error {
	fs, cf := newClientFlags("systems")
	all := fs.Bool("all", false, "include physical hosts")
	if _, err := parseInterspersed(fs, args); err != nil {
		return err
	}
	c, err := cf.client()
	if err != nil {
		return err
	}
	systems, err := c.Systems(context.Background())
	if err != nil {
		return err
	}
	var out []api.System
	for _, s := range systems {
		if *all || s.SystemType == "Composed" {
			out = append(out, s)
		}
	}
	if cf.json {
		return printJSON(out)
	}
	var rows [][]string
	for _, s := range out {
		var blocks []string
		for _, b := range s.Links.ResourceBlocks {
			blocks = append(blocks, b.Last())
		}
		state := s.Oem.Rackpool.CompositionState
		if s.SystemType != "Composed" {
			state = "Physical"
		}
		rows = append(rows, []string{s.ID, s.Name, state, s.Oem.Rackpool.Host, fmt.Sprintf("%.0f", s.MemorySummary.TotalSystemMemoryGiB), strings.Join(blocks, ",")})
	}
	table("SYSTEM\tNAME\tSTATE\tHOST\tMEMORY GiB\tBLOCKS", rows)
	return nil
}

// printSystem prints s block by block, as JSON (--json) or as its ID
// alone (--quiet).
func (cf *clientFlags) printSystem(s *api.System) error {
	switch {
	case cf.json:
		return printJSON(s)
	case cf.quiet:
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
	table("BLOCK\tKIND\tHOST PORT\tRTT ns\tHOPS", rows)
	return nil
}

func runShow(args []string) error {
	fs, cf := newClientFlags("show")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return errors.New("usage: rackpool show SYSTEM")
	}
	c, err := cf.client()
	if err != nil {
		return err
	}
	s, err := c.System(context.Background(), pos[0])
	if err != nil {
		return err
	}
	return cf.printSystem(s)
}

// parseNeed reads "2 gpu model=V100", "64GiB memory", "1 nvme
// capacity=3TB max-latency=2000 generation=ampere".
func parseNeed(spec string) (api.Need, error) {
	f := strings.Fields(spec)
	if len(f) < 2 {
		return api.Need{}, fmt.Errorf("need %q: want \"COUNT KIND [key=value...]\" or \"SIZE memory\"", spec)
	}
	n := api.Need{Kind: strings.ToLower(f[1])}
	if count, err := strconv.Atoi(f[0]); err == nil {
		if count < 1 {
			return n, fmt.Errorf("need %q: count must be at least 1", spec)
		}
		n.Count = count
	} else if n.Kind == "memory" {
		n.Capacity = f[0]
	} else {
		return n, fmt.Errorf("need %q: %q is not a count", spec, f[0])
	}
	for _, kv := range f[2:] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return n, fmt.Errorf("need %q: %q is not key=value", spec, kv)
		}
		switch k {
		case "model":
			n.Model = v
		case "capacity":
			n.Capacity = v
		case "max-latency":
			ns, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return n, fmt.Errorf("need %q: max-latency %q is not a number of nanoseconds", spec, v)
			}
			n.MaxLatencyNS = ns
		default:
			if n.Attributes == nil {
				n.Attributes = map[string]string{}
			}
			n.Attributes[k] = v
		}
	}
	return n, nil
}

func composeFlags(name string) (*flag.FlagSet, *clientFlags, *api.ComposeRequest, *multi) {
	fs, cf := newClientFlags(name)
	if name == "compose" {
		cf.idFlag(fs, "new system")
	}
	req := &api.ComposeRequest{}
	needs := &multi{}
	fs.StringVar(&req.Name, "name", "", "name of the composed system")
	fs.StringVar(&req.Host, "host", "", "host to compose on (default: the scheduler chooses)")
	fs.StringVar(&req.Zone, "zone", "", "confine placement to a topology zone")
	fs.StringVar(&req.Affinity, "affinity", "", "same-drawer or same-switch")
	fs.IntVar(&req.MinCores, "min-cores", 0, "host needs at least this many cores")
	fs.IntVar(&req.MinMemoryGiB, "min-memory", 0, "host needs at least this much local memory (GiB)")
	fs.Var(needs, "need", "a need SPEC (repeatable), e.g. \"2 gpu model=V100\"")
	return fs, cf, req, needs
}

func buildCompose(name string, args []string) (*api.ComposeRequest, *clientFlags, error) {
	fs, cf, req, needs := composeFlags(name)
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return nil, nil, err
	}
	req.Blocks = pos
	for _, spec := range *needs {
		n, err := parseNeed(spec)
		if err != nil {
			return nil, nil, err
		}
		req.Needs = append(req.Needs, n)
	}
	if len(req.Blocks) == 0 && len(req.Needs) == 0 && req.Host == "" {
		return nil, nil, errors.New("name blocks, --need or --host (see rackpool help)")
	}
	return req, cf, nil
}

func runCompose(args []string) error {
	req, cf, err := buildCompose("compose", args)
	if err != nil {
		return err
	}
	c, err := cf.client()
	if err != nil {
		return err
	}
	s, err := c.Compose(context.Background(), *req)
	if err != nil {
		return explainError(err)
	}
	return cf.printSystem(s)
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

func runExplain(args []string) error {
	req, cf, err := buildCompose("explain", args)
	if err != nil {
		return err
	}
	c, err := cf.client()
	if err != nil {
		return err
	}
	e, err := c.Explain(context.Background(), *req)
	if err != nil {
		return err
	}
	if cf.json {
		return printJSON(e)
	}
	if e.Fits {
		fmt.Printf("fits on %s, total round trip %.1f ns:\n", e.Host, e.TotalRoundTripNs)
		var rows [][]string
		for _, b := range e.Blocks {
			rows = append(rows, []string{b.ID, b.Kind, b.HostPort, fmt.Sprintf("%.1f", b.RoundTripNs), strconv.Itoa(b.Hops)})
		}
		table("BLOCK\tKIND\tHOST PORT\tRTT ns\tHOPS", rows)
		return nil
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
	table("HOST\tREASON\tDETAIL", rows)
	return nil
}

func runDecompose(args []string) error {
	fs, cf := newClientFlags("decompose")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return errors.New("usage: rackpool decompose SYSTEM [SYSTEM ...]")
	}
	c, err := cf.client()
	if err != nil {
		return err
	}
	var errs []error
	for _, id := range pos {
		if err := c.Decompose(context.Background(), id); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", id, err))
			continue
		}
		if !cf.json {
			fmt.Println("decomposed", id)
		}
	}
	return errors.Join(errs...)
}

func runExpand(args []string) error {
	fs, cf := newClientFlags("expand")
	cf.idFlag(fs, "system")
	needs := &multi{}
	fs.Var(needs, "need", "a need SPEC (repeatable)")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) < 1 || (len(pos) == 1 && len(*needs) == 0) {
		return errors.New("usage: rackpool expand SYSTEM [--need SPEC] [BLOCK ...]")
	}
	var ns []api.Need
	for _, spec := range *needs {
		n, err := parseNeed(spec)
		if err != nil {
			return err
		}
		ns = append(ns, n)
	}
	c, err := cf.client()
	if err != nil {
		return err
	}
	s, err := c.Expand(context.Background(), pos[0], pos[1:], ns, nil)
	if err != nil {
		return explainError(err)
	}
	return cf.printSystem(s)
}

// runShrink removes blocks with the Rackpool.Shrink action: one update,
// audited as a Shrink.
func runShrink(args []string) error {
	fs, cf := newClientFlags("shrink")
	cf.idFlag(fs, "system")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) < 2 {
		return errors.New("usage: rackpool shrink SYSTEM BLOCK [BLOCK ...]")
	}
	c, err := cf.client()
	if err != nil {
		return err
	}
	var s api.System
	if _, err := c.Do(context.Background(), "POST", "/redfish/v1/Systems/"+url.PathEscape(pos[0])+"/Actions/Oem/Rackpool.Shrink",
		map[string]any{"Blocks": pos[1:]}, &s); err != nil {
		return err
	}
	return cf.printSystem(&s)
}
