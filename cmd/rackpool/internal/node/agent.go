package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"

	"rackpool/api"
	"rackpool/cmd/rackpool/internal/cli"
	"rackpool/cmd/rackpool/internal/client"
	"rackpool/internal/dra"
	"rackpool/internal/hostagent/hoststep"
	"rackpool/internal/telemetry/host"
	"rackpool/internal/telemetry/report"
)

func AgentCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "agent [--control URL] [--system ID] [--host ID] [--dra-node NODE]",
		Short: "report a composed host's real usage to the control plane (telemetry for provisioning)",
		Long: "Runs on a host until SIGTERM. With --system it reports what the composed host really uses (memory\n" +
			"of a cgroup or of the whole machine, block I/O, GPU memory) every --interval (docs/telemetry.md).\n" +
			"With --host it takes the host's saga steps: after an attach, rescan and confirm the device is\n" +
			"healthy; before a detach, drain and confirm it is gone (docs/southbound.md). With --dra-node it is\n" +
			"the " + dra.DriverName + " DRA driver's kubelet plugin for that Kubernetes node: it prepares the devices\n" +
			"`rackpool dra` composed onto this host (a CDI spec per claim; docs/kubernetes.md).",
		Args: cli.NoArgs,
	}
	fs := cmd.Flags()
	var o agentConfig
	fs.StringVar(&o.control, "control", os.Getenv("RACKPOOL_URL"), "control plane URL (credentials from RACKPOOL_USER / RACKPOOL_PASSWORD)")
	cli.CAFileFlag(fs, &o.caFile)
	fs.StringVar(&o.system, "system", "", "report usage for this composed system (or, for an administrator, the host)")
	fs.StringVar(&o.hostID, "host", "", "take this host's attach and detach steps (the account must be a HostAgent of this host)")
	fs.StringVar(&o.sysfsRoot, "sysfs-root", "/sys", "sysfs root the host steps rescan and read (tests point it at a tree they build)")
	fs.StringVar(&o.procRoot, "proc-root", "/proc", "procfs root the host steps read mounts and swaps from")
	fs.StringVar(&o.devRoot, "dev-root", "/dev", "device root the host steps resolve mounted devices in")
	fs.StringVar(&o.cgroup, "cgroup", "", "cgroup to measure, relative to its hierarchy's mount (e.g. system.slice/job.service; / is the root); default the whole machine")
	fs.DurationVar(&o.interval, "interval", 10*time.Second, "how often to sample and push")
	fs.IntVar(&o.buffered, "max-buffered", report.DefaultMaxBuffered, "samples kept while the control plane cannot be reached (the oldest are dropped)")
	fs.StringVar(&o.draNode, "dra-node", "", "be the DRA kubelet plugin of this Kubernetes node (the node whose "+dra.HostLabel+" label names this host)")
	fs.StringVar(&o.kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "with --dra-node: kubeconfig of the cluster (default $KUBECONFIG; empty: the pod's service account)")
	fs.StringVar(&o.cdiDir, "cdi-dir", dra.DefaultCDIDir, "with --dra-node: where the CDI specs of prepared claims go (the container runtime's CDI directory)")
	fs.StringVar(&o.registryDir, "kubelet-registry-dir", kubeletplugin.KubeletRegistryDir, "with --dra-node: the kubelet's plugin registration directory")
	fs.StringVar(&o.pluginDir, "kubelet-plugin-dir", kubeletplugin.KubeletPluginsDir+"/"+dra.DriverName, "with --dra-node: the directory of the plugin's socket")
	cli.VerboseFlag(fs, &o.verbose)
	cmd.RunE = func(*cobra.Command, []string) error { return runAgent(o) }
	return cmd
}

// agentConfig is agent's command line.
type agentConfig struct {
	control, caFile, system, hostID, sysfsRoot, procRoot, devRoot, cgroup string
	draNode, kubeconfig, cdiDir, registryDir, pluginDir                   string
	interval                                                              time.Duration
	buffered                                                              int
	verbose                                                               bool
}

// runAgent runs on a host until SIGTERM. With --system it reports what the
// composed host really uses to the control plane (docs/telemetry.md):
// memory of a cgroup or of the whole machine, block I/O and GPU memory,
// every interval. With --host it takes the host's saga steps
// (docs/southbound.md): after the fabric attached a device, rescan and
// confirm the OS sees it healthy; before a detach, drain and confirm it is
// gone. It authenticates as a HostAgent account bound to that host.
func runAgent(o agentConfig) error {
	switch {
	case o.system == "" && o.hostID == "" && o.draNode == "":
		return errors.New("--system ID (report usage), --host ID (take attach and detach steps) or --dra-node NODE (the DRA kubelet plugin) is required")
	case o.control == "" && (o.system != "" || o.hostID != ""):
		return errors.New("--control URL is required (or set RACKPOOL_URL)")
	case o.interval < 100*time.Millisecond:
		return errors.New("--interval must be at least 100ms")
	case o.buffered < 1:
		return errors.New("--max-buffered must be at least 1")
	}
	level := slog.LevelInfo
	if o.verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	var c *api.Client
	if o.control != "" {
		cf := &client.Flags{URL: o.control, CAFile: o.caFile}
		var err error
		if c, err = cf.Client(); err != nil {
			return err
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// One Host for the steps and the kubelet plugin: the plugin then finds
	// each device where the attach step found it.
	var h *hoststep.Host
	if o.hostID != "" || o.draNode != "" {
		var err error
		if h, err = hoststep.New(hoststep.Options{SysfsRoot: o.sysfsRoot, ProcRoot: o.procRoot, DevRoot: o.devRoot, Logger: log}); err != nil {
			return err
		}
	}
	if o.draNode != "" {
		stopPlugin, err := startDRAPlugin(ctx, o, h, log)
		if err != nil {
			return err
		}
		defer stopPlugin()
	}
	var steps sync.WaitGroup
	if o.hostID != "" {
		log.Info("agent taking host steps", "host", o.hostID, "control", o.control, "sysfs", o.sysfsRoot)
		steps.Add(1)
		go func() {
			defer steps.Done()
			runHostSteps(ctx, c, h, o.hostID, log)
		}()
	}
	defer steps.Wait()
	if o.system == "" {
		<-ctx.Done()
		log.Info("agent stopping")
		return nil
	}
	reader, err := host.New(host.Options{Cgroup: o.cgroup})
	if err != nil {
		return err
	}
	if err := checkSystem(ctx, c, o.system); err != nil {
		return err
	}
	timeout := min(max(o.interval, 2*time.Second), 10*time.Second)
	rep, err := report.New(report.Options{
		Interval:    o.interval,
		MaxBuffered: o.buffered,
		Logger:      log,
		Sample:      reader.Read,
		Push: func(ctx context.Context, s []api.UsageSample) error {
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			return c.SubmitSystemUsage(ctx, o.system, s)
		},
	})
	if err != nil {
		return err
	}
	log.Info("agent reporting", "system", o.system, "control", o.control, "memory", string(reader.Mode()), "cgroup", reader.Dir(),
		"gpus", reader.GPUs(), "interval", o.interval)
	rep.Run(ctx)
	log.Info("agent stopping", "unsent", rep.Buffered())
	return nil
}

// checkSystem fails fast on what retrying cannot cure: a system the
// account cannot see (or that does not exist), or credentials that are
// refused. A control plane that cannot be reached yet is not an error:
// the reporter retries.
func checkSystem(ctx context.Context, c *api.Client, system string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err := c.Do(ctx, "GET", "/redfish/v1/Systems/"+url.PathEscape(system), nil, nil)
	var ae *api.Error
	if errors.As(err, &ae) {
		switch ae.Status {
		case http.StatusNotFound:
			return fmt.Errorf("system %s: not found, or not of this account's tenant (rackpool systems lists them)", system)
		case http.StatusUnauthorized, http.StatusForbidden:
			return fmt.Errorf("the control plane refuses this account: %w", err)
		}
	}
	return nil
}

// runHostSteps long-polls the control plane for hostID's saga steps and
// runs each (at most once at a time per step ID: a step offered again while
// it runs is skipped) until ctx ends. A control plane that cannot be
// reached is retried with backoff.
func runHostSteps(ctx context.Context, c *api.Client, h *hoststep.Host, hostID string, log *slog.Logger) {
	var mu sync.Mutex
	running := map[string]bool{}
	var wg sync.WaitGroup
	defer wg.Wait()
	backoff := time.Second
	for ctx.Err() == nil {
		list, err := c.HostSteps(ctx, hostID, 25*time.Second)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			log.Warn("poll host steps", "err", err, "retry in", backoff)
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 30*time.Second)
			continue
		}
		backoff = time.Second
		for _, st := range list {
			mu.Lock()
			busy := running[st.ID]
			running[st.ID] = true
			mu.Unlock()
			if busy {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				runHostStep(ctx, c, h, st, log)
				mu.Lock()
				delete(running, st.ID)
				mu.Unlock()
			}()
		}
	}
}

// runHostStep takes one step and reports its outcome, retrying the report
// until the step's deadline.
func runHostStep(ctx context.Context, c *api.Client, h *hoststep.Host, st api.HostStep, log *slog.Logger) {
	sctx, cancel := context.WithDeadline(ctx, st.Deadline)
	defer cancel()
	devs, have := hostDevices(st.Devices), hostDevices(st.Have)
	start := time.Now()
	var rep hoststep.Report
	var err error
	switch st.Op {
	case "attach":
		rep, err = h.Attach(sctx, devs, have)
	case "detach":
		rep, err = h.Detach(sctx, devs, have)
	default:
		err = fmt.Errorf("unknown step operation %q (upgrade the agent)", st.Op)
	}
	var done []string
	for _, s := range rep.Steps {
		done = append(done, s.String())
	}
	res := api.HostStepResult{Success: err == nil, Message: strings.Join(done, "; ")}
	if err != nil {
		res.Message = err.Error()
	}
	log.Info("host step", "step", st.ID, "op", st.Op, "devices", len(devs), "took", time.Since(start), "ok", err == nil, "report", res.Message)
	for wait := 200 * time.Millisecond; ; wait = min(2*wait, 5*time.Second) {
		rctx, rcancel := context.WithTimeout(sctx, 10*time.Second)
		rerr := c.CompleteHostStep(rctx, st.Host, st.ID, res)
		rcancel()
		var ae *api.Error
		if rerr == nil || errors.As(rerr, &ae) && ae.Status == http.StatusNotFound {
			if rerr != nil {
				log.Warn("the control plane no longer waits for this step", "step", st.ID)
			}
			return
		}
		log.Warn("report host step", "step", st.ID, "err", rerr)
		select {
		case <-sctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

func hostDevices(in []api.HostDevice) []hoststep.Device {
	out := make([]hoststep.Device, 0, len(in))
	for _, d := range in {
		out = append(out, hoststep.Device{Block: d.Block, Device: d.Device, Kind: d.Kind, VendorID: d.VendorID,
			DeviceID: d.DeviceID, Serial: d.Serial, Bytes: d.Bytes})
	}
	return out
}

// startDRAPlugin registers the DRA kubelet plugin for o.draNode with the
// kubelet and serves it until the returned stop is called.
func startDRAPlugin(ctx context.Context, o agentConfig, h *hoststep.Host, log *slog.Logger) (stop func(), err error) {
	kube, err := kubeClient(o.kubeconfig)
	if err != nil {
		return nil, err
	}
	if fi, err := os.Stat(o.registryDir); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("--kubelet-registry-dir %s: not a directory (is the kubelet's plugin registry mounted?)", o.registryDir)
	}
	for _, d := range []string{o.pluginDir, o.cdiDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("DRA kubelet plugin: %w", err)
		}
	}
	p := &dra.NodePlugin{Host: h, CDIDir: o.cdiDir, Logger: log}
	helper, err := kubeletplugin.Start(ctx, p, kubeletplugin.DriverName(dra.DriverName), kubeletplugin.KubeClient(kube),
		kubeletplugin.NodeName(o.draNode), kubeletplugin.RegistrarDirectoryPath(o.registryDir),
		kubeletplugin.PluginDataDirectoryPath(o.pluginDir))
	if err != nil {
		return nil, fmt.Errorf("start the DRA kubelet plugin: %w", err)
	}
	log.Info("agent serving the DRA kubelet plugin", "driver", dra.DriverName, "node", o.draNode, "plugin", o.pluginDir, "cdi", o.cdiDir)
	return helper.Stop, nil
}
