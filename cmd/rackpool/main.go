// Command rackpool is the composable disaggregated infrastructure control
// plane and its client. Run "rackpool help" for the verbs.
//
// The verbs are cobra commands (github.com/spf13/cobra, flags from
// github.com/spf13/pflag): newRoot lists them all, grouped. Package main
// builds serve and fabric-emulator (the control plane's wiring); the other
// verbs come from packages by role under internal/: client (verbs against
// the API), node (processes that run on a node), offline (what runs
// without a control plane), all sharing internal/cli. Flags may come before, between
// or after the positional arguments, and "rackpool completion
// bash|zsh|fish" writes a shell completion script.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"rackpool/cmd/rackpool/internal/cli"
	"rackpool/cmd/rackpool/internal/client"
	"rackpool/cmd/rackpool/internal/node"
	"rackpool/cmd/rackpool/internal/offline"
	"rackpool/internal/pager"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// Exit statuses.
const (
	exitFailure = 1 // the verb failed
	exitUsage   = 2 // the command line is wrong: no such verb, flag or argument count
)

func main() {
	// `rackpool page` starts this executable again as its pager's
	// fault-handling helper, marked by the environment.
	if pager.IsHelper() {
		os.Exit(pager.RunHelper())
	}
	os.Exit(run(os.Args[1:], os.Stderr))
}

// run executes one command line and returns its exit status, having
// written any error to stderr as "rackpool VERB: ...".
func run(args []string, stderr io.Writer) int {
	root := newRoot()
	root.SetArgs(args)
	root.SetErr(stderr)
	cmd, err := root.ExecuteC()
	if err == nil || errors.Is(err, flag.ErrHelp) || errors.Is(err, pflag.ErrHelp) {
		return 0
	}
	var ue cli.UsageError
	if errors.As(err, &ue) {
		fmt.Fprintf(stderr, "%s: %v\n", cmd.CommandPath(), err)
		fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
		return exitUsage
	}
	fmt.Fprintln(stderr, cmd.CommandPath()+": "+err.Error()+tlsHint(err))
	return exitStatus(err)
}

// execute runs one command line as run does and returns the verb's error
// (tests: they look at the error, not at stderr).
func execute(args ...string) error {
	root := newRoot()
	root.SetArgs(args)
	root.SetOut(io.Discard)
	root.SetErr(io.Discard)
	_, err := root.ExecuteC()
	return err
}

// Verb groups, in the order "rackpool help" lists them.
var groups = []*cobra.Group{
	{ID: "compose", Title: "Composition (client verbs):"},
	{ID: "memory", Title: "Pooled memory (client verbs):"},
	{ID: "drives", Title: "Pooled drives (client verbs):"},
	{ID: "admin", Title: "Administration (client verbs):"},
	{ID: "servers", Title: "Servers and agents:"},
	{ID: "offline", Title: "Simulation, provisioning and tools:"},
}

const rootLong = `rackpool composes logical servers out of pooled GPUs, drives, NICs and memory.

Client verbs talk to --url (default $RACKPOOL_URL or https://127.0.0.1:8080) as
$RACKPOOL_USER (default Administrator) with $RACKPOOL_PASSWORD, and print
tables; add --json for machine-readable output. compose, expand, shrink and
lease take -q (--quiet) to print only the ID: SYS=$(rackpool compose -q ...).
They trust the system's CAs and --ca-file (default $RACKPOOL_CA_FILE, else
data/tls/ca.pem, the CA that 'rackpool serve' creates in its default data
directory).

A need SPEC is "COUNT KIND [key=value...]" or "SIZE memory", e.g.
  --need "2 gpu model=V100" --need "64GiB memory" --need "1 nvme capacity=3TB max-latency=2000"

Shell completion: source <(rackpool completion bash), or see
'rackpool completion --help' for zsh and fish.`

// newRoot builds the command tree: every verb, in its group.
func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "rackpool",
		Short:         "composable disaggregated infrastructure: control plane, data plane and client",
		Long:          rootLong,
		Args:          cobra.ArbitraryArgs,
		RunE:          cli.GroupRun,
		SilenceErrors: true,
		SilenceUsage:  true,
		// "rackpool [command]", not "rackpool [flags]": the root's only
		// flag is --help.
		DisableFlagsInUseLine: true,
	}
	root.SetFlagErrorFunc(cli.FlagUsageError)
	root.AddGroup(groups...)
	add := func(group string, cmds ...*cobra.Command) {
		for _, c := range cmds {
			c.GroupID = group
			root.AddCommand(c)
		}
	}
	add("compose", client.BlocksCmd(), client.ZonesCmd(), client.SystemsCmd(), client.ShowCmd(), client.ComposeCmd(),
		client.DecomposeCmd(), client.ExpandCmd(), client.ShrinkCmd(), client.ExplainCmd(), client.TopologyCmd())
	add("memory", client.LeaseCmd(), client.LeasesCmd(), client.RenewCmd(), client.ReleaseCmd(), client.MemnodesCmd())
	add("drives", client.DrivesCmd(), client.DriveCmd(node.DriveConnectCmd()), client.BlocknodesCmd(), node.NbdCertsCmd())
	add("admin", client.ExportCmd(), client.AuditCmd())
	add("servers", serveCmd(), node.MemnodeCmd(), node.BlocknodeCmd(), node.CacheCmd(), node.AgentCmd(), node.DRACmd(), node.SlurmCmd(), fabricEmulatorCmd())
	add("offline", offline.SimCmd(), offline.ProvisionCmd(client.ProvisionSubscribeCmd(), client.ProvisionUnsubscribeCmd(), client.ProvisionStatusCmd()),
		node.PageCmd(), offline.DiscoverCmd(), versionCmd())
	root.SetHelpCommandGroupID("offline")
	root.SetCompletionCommandGroupID("offline")
	// cobra's own verbs, worded as ours.
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		switch c.Name() {
		case "help":
			c.Short = "help about any verb: rackpool help VERB [SUB-VERB]"
		case "completion":
			c.Short = "write a shell completion script: rackpool completion bash|zsh|fish|powershell"
		}
	}
	return root
}

func versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "print the version",
		Long:  "Prints the version this binary was built as (make sets it from git describe).",
		Args:  cli.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			fmt.Println("rackpool", version)
			return nil
		},
	}
}
