package node

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"rackpool/cmd/rackpool/internal/cli"
	"rackpool/cmd/rackpool/internal/client"
	"rackpool/internal/dra"
	"rackpool/internal/topology"
)

// DRACmd is `rackpool dra`, the Kubernetes DRA controller.
func DRACmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dra [--url URL] [--kubeconfig FILE] [--topology FILE]",
		Short: "publish the pool to Kubernetes (DRA ResourceSlices) and compose what the scheduler allocates",
		Long: "Runs until SIGTERM as the " + dra.DriverName + " DRA driver's controller: the pool's free GPUs, FPGAs,\n" +
			"drives and memory blocks as ResourceSlices, each device for the nodes (label " + dra.HostLabel + ")\n" +
			"whose host reaches it, following the service's event stream; a claim the scheduler allocates is\n" +
			"composed onto the node's system and its binding condition set. Credentials for the service from\n" +
			"RACKPOOL_USER / RACKPOOL_PASSWORD; the cluster from --kubeconfig, else from inside a pod.",
		Args: cli.NoArgs,
	}
	var cf client.Flags
	cf.Register(cmd.Flags())
	var kubeconfig, topo string
	var grace time.Duration
	var verbose bool
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the cluster (default $KUBECONFIG; empty: the pod's service account)")
	cmd.Flags().StringVar(&topo, "topology", "", "the topology file serve runs (default: the built-in example rack)")
	cmd.Flags().DurationVar(&grace, "grace", dra.DefaultGrace, "how long a released claim's devices stay on the node's system before they are detached")
	cli.VerboseFlag(cmd.Flags(), &verbose)
	cmd.RunE = func(*cobra.Command, []string) error {
		if grace <= 0 {
			return fmt.Errorf("--grace must be positive, got %v", grace)
		}
		top := topology.LoadDefault()
		if topo != "" {
			var err error
			if top, err = topology.LoadFile(topo); err != nil {
				return err
			}
		}
		c, err := cf.Client()
		if err != nil {
			return err
		}
		kube, err := kubeClient(kubeconfig)
		if err != nil {
			return err
		}
		level := slog.LevelInfo
		if verbose {
			level = slog.LevelDebug
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		return dra.Run(ctx, dra.Options{Kube: kube, Rackpool: c, Topology: top, Grace: grace,
			Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))})
	}
	return cmd
}

// kubeClient is a client of the cluster kubeconfig names, or (empty) of
// the one the process runs in as a pod.
func kubeClient(kubeconfig string) (kubernetes.Interface, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("the cluster's configuration: %w", err)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("the cluster's client: %w", err)
	}
	return kube, nil
}
