// Package cli holds what every rackpool verb shares, whichever package
// builds it: usage errors (exit status 2) and the positional argument
// rules that produce them, the Run of a verb made of sub-verbs, the flags
// several verbs declare alike, and the table, JSON and size printing of
// their output.
package cli

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"rackpool/api"
)

// UsageError is a command line that does not parse: exit status 2.
type UsageError struct{ Err error }

func (e UsageError) Error() string { return e.Err.Error() }
func (e UsageError) Unwrap() error { return e.Err }

// Usagef formats a UsageError.
func Usagef(format string, a ...any) error { return UsageError{fmt.Errorf(format, a...)} }

// FlagUsageError makes a flag that does not parse a usage error (the
// root's SetFlagErrorFunc; the verbs inherit it).
func FlagUsageError(_ *cobra.Command, err error) error { return UsageError{err} }

// GroupRun is the Run of a verb made of sub-verbs (the root, drive,
// provision): without one, or with one it does not know, the command line
// is wrong.
func GroupRun(cmd *cobra.Command, args []string) error {
	var names []string
	for _, c := range cmd.Commands() {
		if c.IsAvailableCommand() && c.Name() != "help" && c.Name() != "completion" {
			names = append(names, c.Name())
		}
	}
	if len(args) == 0 {
		if !cmd.HasParent() {
			cmd.SetOut(cmd.ErrOrStderr())
			_ = cmd.Help()
			return UsageError{errors.New("missing verb")}
		}
		return Usagef("missing subcommand: %s", strings.Join(names, ", "))
	}
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2
	}
	msg := fmt.Sprintf("unknown subcommand %q: %s", args[0], strings.Join(names, ", "))
	if !cmd.HasParent() {
		msg = fmt.Sprintf("unknown verb %q", args[0])
	}
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += fmt.Sprintf(" (did you mean %s?)", strings.Join(s, " or "))
	}
	return UsageError{errors.New(msg)}
}

// Positional argument rules, as usage errors naming the verb's usage line.
var (
	NoArgs = func(cmd *cobra.Command, args []string) error {
		if len(args) > 0 {
			return Usagef("unexpected argument %q", args[0])
		}
		return nil
	}
	OneArg       = argCount(func(n int) bool { return n == 1 })
	SomeArgs     = argCount(func(n int) bool { return n >= 1 })
	TwoOrMore    = argCount(func(n int) bool { return n >= 2 })
	AtMostOneArg = argCount(func(n int) bool { return n <= 1 })
)

func argCount(ok func(int) bool) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if !ok(len(args)) {
			return Usagef("usage: %s", cmd.UseLine())
		}
		return nil
	}
}

// CAFileFlag adds --ca-file to fs.
func CAFileFlag(fs *pflag.FlagSet, p *string) {
	fs.StringVar(p, "ca-file", os.Getenv("RACKPOOL_CA_FILE"),
		"PEM CA certificate to trust besides the system's (default $RACKPOOL_CA_FILE, else "+api.DefaultCAFile+" when it exists)")
}

// VerboseFlag adds -v (--verbose): debug messages.
func VerboseFlag(fs *pflag.FlagSet, p *bool) {
	fs.BoolVarP(p, "verbose", "v", false, "log debug messages")
}

// positiveDuration is a duration flag that must be above zero when it is
// given: "--ttl -5s" or "--ttl 0" is an error, not the service's default.
type positiveDuration time.Duration

func (d *positiveDuration) String() string { return time.Duration(*d).String() }
func (d *positiveDuration) Type() string   { return "duration" }
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

// TTLFlag adds --ttl, a positive duration that stays 0 when not given.
func TTLFlag(fs *pflag.FlagSet, p *time.Duration, usage string) {
	fs.Var((*positiveDuration)(p), "ttl", usage)
}
