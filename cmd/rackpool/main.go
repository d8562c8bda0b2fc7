// Command rackpool is the composable disaggregated infrastructure control
// plane and its client. Run "rackpool help" for the verbs.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

type command struct {
	name, args, help string
	run              func(args []string) error
}

func commands() []command {
	return []command{
		{"serve", "[--addr A] [--data DIR] [--topology FILE]", "run the control plane (Redfish API) on the emulated fabrics", runServe},
		{"blocks", "[--kind K] [--state S]", "list resource blocks with their composition state", runBlocks},
		{"zones", "", "list resource zones (what each host can be composed with)", runZones},
		{"systems", "", "list composed systems", runSystems},
		{"show", "SYSTEM", "show one composed system, block by block", runShow},
		{"compose", "[-q] [--host H] [--need SPEC]... [BLOCK...]", "compose a system from specific blocks or by need", runCompose},
		{"decompose", "SYSTEM...", "decompose systems, returning their blocks to the pools", runDecompose},
		{"expand", "SYSTEM [--need SPEC]... [BLOCK...]", "add blocks to a composed system", runExpand},
		{"shrink", "SYSTEM BLOCK...", "remove blocks from a composed system", runShrink},
		{"explain", "[same as compose]", "say where a request would go, or why it does not fit", runExplain},
		{"export", "[-o FILE]", "export the current allocation (systems, tenants) for 'serve --import'", runExport},
		{"audit", "[--user U] [--outcome O] [--since T] [--format table|csv|jsonl]", "print or export the audit log", runAudit},
		{"memnode", "--addr A --capacity SIZE --control URL", "serve pooled memory to lease holders (registers with the control plane)", runMemnode},
		{"cache", "--addr A --local-memory SIZE [--remote-memory SIZE --control URL]", "memcached-compatible cache spilling evictions to pooled memory", runCache},
		{"lease", "[-q] --size SIZE [--host H] [--ttl D]", "lease pooled memory (GetMemory): endpoint, token, expiry", runLease},
		{"leases", "", "list memory leases", runLeases},
		{"renew", "LEASE [--ttl D]", "renew a memory lease (new token and expiry)", runRenew},
		{"page", "--memnode A --token T | --control URL [--workload sort|table]", "run a workload on a region paged to pooled memory (userfaultfd), against all local", runPage},
		{"release", "LEASE...", "release memory leases (their memory is zeroed before reuse)", runRelease},
		{"memnodes", "", "list registered memory nodes", runMemnodes},
		{"blocknode", "--addr A --name HOST --drive-dir DIR --control URL", "serve the pooled drives the SAS switch maps to HOST over NBD", runBlocknode},
		{"blocknodes", "", "list registered blocknodes", runBlocknodes},
		{"nbd-certs", "--out DIR --server NAMES | --client NAME", "issue NBD TLS certificates from the service's CA (for blocknode and drive connect --tls-certificates)", runNbdCerts},
		{"drives", "", "list pooled drives: state, blocknode, epoch", runDrives},
		{"drive", "show|token|connect|release DRIVE", "where a drive is served, a token for it, serve it locally over NBD (connect --listen), or give its write reservation back", runDrive},
		{"agent", "--control URL --system ID [--cgroup PATH]", "report a composed host's real usage to the control plane (telemetry for provisioning)", runAgent},
		{"sim", "--scenario FILE --out DIR | --trace CSV ...", "simulate a datacenter on the placement engine (see sim --help)", runSim},
		{"provision", "record|gen|eval|subscribe|status ...", "demand traces and offline evaluation of provisioning policies (docs/provisioning.md)", runProvision},
		{"fabric-emulator", "--topology FILE --fabric ID --addr A", "serve one emulated fabric as a Redfish fabric manager (tests of the redfish driver)", runFabricEmulator},
		{"discover", "--redfish URL [--user U] [--fabric ID]... [--out FILE]", "read a Redfish service's fabrics (GET only) and write a topology file for them", runDiscover},
		{"topology", "[--file FILE]", "show the topology as text (from the server, or a file validated locally)", runTopology},
		{"version", "", "print the version", func([]string) error { fmt.Println("rackpool", version); return nil }},
	}
}

func usage() {
	fmt.Fprintf(os.Stderr, `rackpool composes logical servers out of pooled GPUs, drives, NICs and memory.

Usage: rackpool VERB [flags] [args]

Verbs:
`)
	for _, c := range commands() {
		fmt.Fprintf(os.Stderr, "  %-10s %-44s %s\n", c.name, c.args, c.help)
	}
	fmt.Fprintf(os.Stderr, `
Client verbs talk to --url (default $RACKPOOL_URL or https://127.0.0.1:8080) as
$RACKPOOL_USER (default Administrator) with $RACKPOOL_PASSWORD, and print
tables; add --json for machine-readable output. compose, expand, shrink and
lease take -q (--quiet) to print only the ID: SYS=$(rackpool compose -q ...).
They trust the system's CAs and --ca-file (default $RACKPOOL_CA_FILE, else
data/tls/ca.pem, the CA that 'rackpool serve' creates in its default data
directory).

A need SPEC is "COUNT KIND [key=value...]" or "SIZE memory", e.g.
  --need "2 gpu model=V100" --need "64GiB memory" --need "1 nvme capacity=3TB max-latency=2000"
`)
}

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	verb := os.Args[1]
	if verb == "help" || verb == "-h" || verb == "--help" {
		usage()
		return
	}
	for _, c := range commands() {
		if c.name == verb {
			if err := c.run(os.Args[2:]); err != nil {
				if errors.Is(err, flag.ErrHelp) {
					os.Exit(2)
				}
				fmt.Fprintln(os.Stderr, "rackpool "+verb+": "+err.Error()+tlsHint(err))
				os.Exit(1)
			}
			return
		}
	}
	fmt.Fprintf(os.Stderr, "rackpool: unknown verb %q (try rackpool help)\n", verb)
	os.Exit(2)
}

// parseInterspersed parses flags wherever they appear among positional
// arguments and returns the positional ones.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// positiveDuration is a duration flag that must be above zero when it is
// given: "--ttl -5s" or "--ttl 0" is an error, not the service's default.
type positiveDuration time.Duration

func (d *positiveDuration) String() string { return time.Duration(*d).String() }
func (d *positiveDuration) Set(v string) error {
	x, err := time.ParseDuration(v)
	if err != nil {
		return err
	}
	if x <= 0 {
		return errors.New("it must be positive (leave the flag out for the service's default)")
	}
	*d = positiveDuration(x)
	return nil
}

// ttlFlag adds --ttl, a positive duration that is 0 when not given.
func ttlFlag(fs *flag.FlagSet, usage string) *time.Duration {
	var d time.Duration
	fs.Var((*positiveDuration)(&d), "ttl", usage)
	return &d
}

// multi is a repeatable string flag.
type multi []string

func (m *multi) String() string     { return strings.Join(*m, "; ") }
func (m *multi) Set(v string) error { *m = append(*m, v); return nil }
