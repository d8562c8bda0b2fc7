package node

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"rackpool/cmd/rackpool/internal/cli"
	"rackpool/cmd/rackpool/internal/client"
	"rackpool/internal/slurm"
	"rackpool/internal/topology"
)

// SlurmCmd is `rackpool slurm`: Slurm's power-saving programs, and the
// slurm.conf lines they need.
func SlurmCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "slurm",
		Short: "compose Slurm's nodes on demand: its Resume, Suspend and ResumeFail programs (docs/slurm.md)",
		Long: "slurmctld runs `rackpool slurm resume HOSTLIST` as its ResumeProgram (through the wrappers `slurm config`\n" +
			"writes): each node is composed with the features its jobs asked for (templates in --config) on its\n" +
			"rackpool host and powered on. `suspend` powers nodes off and takes them apart; `resume-fail` takes apart\n" +
			"nodes that did not come up. `config` writes the slurm.conf lines, helpers.conf and the wrappers.",
		Args: cli.NoArgs,
		RunE: cli.GroupRun,
	}
	cmd.AddCommand(slurmPowerCmd("resume"), slurmPowerCmd("suspend"), slurmPowerCmd("resume-fail"), slurmFeaturesCmd(), slurmConfigCmd())
	return cmd
}

func slurmPowerCmd(verb string) *cobra.Command {
	short := map[string]string{
		"resume":      "compose and power on nodes (slurmctld's ResumeProgram; reads SLURM_RESUME_FILE)",
		"suspend":     "power off nodes and take their compositions apart (SuspendProgram)",
		"resume-fail": "take apart nodes that did not come up in time (ResumeFailProgram)",
	}[verb]
	// slurmctld may pass the features to boot into after the hostlist.
	long := map[string]string{
		"resume": "Run by slurmctld (through the wrapper `slurm config` writes) with the nodes to resume. The features\n" +
			"each node's jobs asked for come from SLURM_RESUME_FILE (else `scontrol show job`); each node is composed\n" +
			"with the templates of those features on its rackpool host, as one system named `slurm NODE [features]`,\n" +
			"and powered on; the program returns once it is On. A node that fails is taken apart and set DOWN with\n" +
			"the reason, so Slurm requeues its jobs at once.",
		"suspend": "Run by slurmctld after SuspendTime idle: each node's system is powered off and decomposed.",
		"resume-fail": "Run by slurmctld for nodes that did not come up within ResumeTimeout: each node's system is\n" +
			"powered off and decomposed, so nothing stays composed for a node Slurm has given up on.",
	}[verb]
	cmd := &cobra.Command{Use: verb + " HOSTLIST [FEATURES]", Short: short, Long: long, Args: cobra.RangeArgs(1, 2)}
	var cf client.Flags
	cf.Register(cmd.Flags())
	var cfgPath, scontrol, logPath string
	var timeout time.Duration
	cmd.Flags().StringVar(&cfgPath, "config", "", "the slurm configuration file: nodes and templates (required)")
	cmd.Flags().StringVar(&scontrol, "scontrol", "scontrol", "the scontrol command")
	cmd.Flags().StringVar(&logPath, "log", "", "append the log to this file (default standard error; slurmctld discards it)")
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Minute, "how long one node's compose and power-on may take")
	cmd.RunE = func(_ *cobra.Command, args []string) error {
		if cfgPath == "" {
			return cli.Usagef("--config FILE is required")
		}
		if timeout <= 0 {
			return cli.Usagef("--timeout must be positive")
		}
		cfg, err := slurm.LoadConfig(cfgPath)
		if err != nil {
			return err
		}
		out := os.Stderr
		if logPath != "" {
			f, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o640)
			if err != nil {
				return err
			}
			defer f.Close()
			out = f
		}
		log := slog.New(slog.NewTextHandler(out, nil)).With("program", verb)
		c, err := cf.Client()
		if err != nil {
			return err
		}
		p := &slurm.Power{Rackpool: c, Config: cfg, Slurm: slurm.Scontrol{Path: scontrol}, Timeout: timeout, Logger: log}
		ctx, cancel := context.WithTimeout(context.Background(), timeout+time.Minute)
		defer cancel()
		switch verb {
		case "resume":
			extra := ""
			if len(args) == 2 {
				extra = args[1]
			}
			err := p.ResumeHostlist(ctx, args[0], os.Getenv("SLURM_RESUME_FILE"), extra)
			if err != nil {
				log.Error("slurm: resume", "nodes", args[0], "err", err)
			}
			return err
		default:
			nodes, err := slurm.ExpandHostlist(args[0])
			if err != nil {
				return err
			}
			run := p.Suspend
			if verb == "resume-fail" {
				run = p.ResumeFail
			}
			if err := run(ctx, nodes); err != nil {
				log.Error("slurm: "+verb, "nodes", args[0], "err", err)
				return err
			}
			if verb == "resume-fail" {
				log.Warn("slurm: nodes did not come up in time; taken apart", "nodes", args[0])
			}
			return nil
		}
	}
	return cmd
}

// slurmFeaturesCmd is node_features/helpers' Helper: with no features it
// prints the node's active features, those its composition was made for.
func slurmFeaturesCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "features [FEATURE...]",
		Short: "node_features/helpers' Helper: print the features this node's composition was made for",
		Long: "Run by slurmd (through the wrapper `slurm config` writes). Without arguments it prints the features\n" +
			"the node's rackpool composition was made for, one a line: those are active. With features (Slurm asks\n" +
			"for a reboot into them) it refuses: rackpool composes a node when Slurm resumes it, so a node changes\n" +
			"features by being suspended and resumed.",
	}
	var cf client.Flags
	cf.Register(cmd.Flags())
	var cfgPath, node string
	cmd.Flags().StringVar(&cfgPath, "config", "", "the slurm configuration file (required)")
	cmd.Flags().StringVar(&node, "node", os.Getenv("RACKPOOL_SLURM_NODE"), "this node's Slurm name (default $RACKPOOL_SLURM_NODE, else the host name)")
	cmd.Flags().String("log", "", "ignored (the wrappers pass it)")
	cmd.RunE = func(_ *cobra.Command, args []string) error {
		if len(args) > 0 {
			return fmt.Errorf("rackpool composes features when Slurm resumes a node; it does not reboot into %v (suspend the node instead)", args)
		}
		if cfgPath == "" {
			return cli.Usagef("--config FILE is required")
		}
		cfg, err := slurm.LoadConfig(cfgPath)
		if err != nil {
			return err
		}
		if node == "" {
			h, err := os.Hostname()
			if err != nil {
				return err
			}
			node, _, _ = strings.Cut(h, ".")
		}
		c, err := cf.Client()
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		feats, err := (&slurm.Power{Rackpool: c, Config: cfg}).ActiveFeatures(ctx, node)
		if err != nil {
			return err
		}
		for _, f := range feats {
			fmt.Println(f)
		}
		return nil
	}
	return cmd
}

func slurmConfigCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config --config FILE --out DIR",
		Short: "write slurm.conf's node, partition and power-saving lines, helpers.conf and the power programs' wrappers",
		Long: "Writes into --out: slurm-rackpool.conf (Include it in slurm.conf: the power-saving settings, a CLOUD\n" +
			"NodeName line per node offering the templates the placement engine can compose onto its host, the\n" +
			"partition), helpers.conf (beside slurm.conf) and the wrappers slurmctld and slurmd run\n" +
			"(rackpool-slurm-resume, -suspend, -resume-fail, -features), which read the service's address and\n" +
			"credentials from --env-file. A template no node can take is reported.",
		Args: cli.NoArgs,
	}
	var cfgPath, topo, out, programs, envFile, partition, bin, logFile string
	var o slurm.ConfOptions
	cmd.Flags().StringVar(&cfgPath, "config", "", "the slurm configuration file: nodes and templates (required)")
	cmd.Flags().StringVar(&topo, "topology", "", "the topology file serve runs (default: the built-in example rack)")
	cmd.Flags().StringVar(&out, "out", "", "directory to write into (required)")
	cmd.Flags().StringVar(&programs, "programs", "", "where the wrappers will be installed (default --out, made absolute)")
	cmd.Flags().StringVar(&envFile, "env-file", "/etc/rackpool/slurm.env", "the file the wrappers read RACKPOOL_URL, RACKPOOL_USER, RACKPOOL_PASSWORD, RACKPOOL_CA_FILE (and SLURM_CONF, if not the default) from; readable by slurmctld's user only")
	cmd.Flags().StringVar(&partition, "partition", "rackpool", "the partition of the nodes")
	cmd.Flags().StringVar(&bin, "rackpool", "", "the rackpool binary the wrappers run (default: this one)")
	cmd.Flags().StringVar(&logFile, "log", "/var/log/slurm/rackpool-power.log", "the log the power programs append to (empty: standard error, which slurmctld discards)")
	cmd.Flags().DurationVar(&o.SuspendTime, "suspend-time", 10*time.Minute, "idle time before a node is taken apart")
	cmd.Flags().DurationVar(&o.ResumeTimeout, "resume-timeout", 10*time.Minute, "how long Slurm waits for a resumed node")
	cmd.Flags().DurationVar(&o.SuspendTimeout, "suspend-timeout", 2*time.Minute, "how long Slurm waits for a suspend")
	cmd.RunE = func(*cobra.Command, []string) error {
		if cfgPath == "" || out == "" {
			return cli.Usagef("--config FILE and --out DIR are required")
		}
		cfg, err := slurm.LoadConfig(cfgPath)
		if err != nil {
			return err
		}
		top := topology.LoadDefault()
		if topo != "" {
			if top, err = topology.LoadFile(topo); err != nil {
				return err
			}
		}
		if bin == "" {
			if bin, err = os.Executable(); err != nil {
				return err
			}
		}
		absOut, err := filepath.Abs(out)
		if err != nil {
			return err
		}
		absCfg, err := filepath.Abs(cfgPath)
		if err != nil {
			return err
		}
		if programs == "" {
			programs = absOut
		}
		o.Programs, o.Partition = programs, partition
		g, err := slurm.Generate(cfg, top, o)
		if err != nil {
			return err
		}
		if err := slurm.WriteFiles(out, g, bin, envFile, absCfg, logFile); err != nil {
			return err
		}
		for _, n := range g.Notes {
			fmt.Fprintln(os.Stderr, "note:", n)
		}
		fmt.Printf("wrote %s: slurm-rackpool.conf (Include it in slurm.conf), helpers.conf, rackpool-slurm-{resume,suspend,resume-fail}\n", out)
		return nil
	}
	return cmd
}
