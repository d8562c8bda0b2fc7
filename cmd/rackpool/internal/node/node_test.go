package node

import (
	"io"

	"github.com/spf13/cobra"

	"rackpool/cmd/rackpool/internal/cli"
)

// execute runs one command line on a root holding the node verbs, with
// flag errors as usage errors as under rackpool's root, and returns the
// verb's error.
func execute(args ...string) error {
	root := &cobra.Command{Use: "rackpool", SilenceErrors: true, SilenceUsage: true}
	root.SetFlagErrorFunc(cli.FlagUsageError)
	root.AddCommand(MemnodeCmd(), BlocknodeCmd(), CacheCmd(), AgentCmd(), PageCmd(), NbdCertsCmd(), DriveConnectCmd(), SlurmCmd())
	root.SetArgs(args)
	root.SetOut(io.Discard)
	root.SetErr(io.Discard)
	return root.Execute()
}
