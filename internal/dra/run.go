package dra

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/dynamic-resource-allocation/resourceslice"

	"rackpool/api"
	"rackpool/internal/inventory"
	"rackpool/internal/topology"
)

// Options configure Run.
type Options struct {
	Kube     kubernetes.Interface
	Rackpool *api.Client
	// Topology is the rack serve runs (the same file): the devices' node
	// selectors come from its paths.
	Topology *topology.Topology
	// Grace is how long a released device stays on the node's system
	// (DefaultGrace when 0).
	Grace  time.Duration
	Logger *slog.Logger
}

// Run is the driver's controller until ctx ends: it publishes the pool's
// free devices as ResourceSlices and keeps them in step with rackpool's
// event stream (Follow), and attaches what the scheduler allocates
// (RunAttacher).
func Run(ctx context.Context, o Options) error {
	if o.Kube == nil || o.Rackpool == nil || o.Topology == nil {
		return fmt.Errorf("dra: Kube, Rackpool and Topology are required")
	}
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	// Every pooled block's device name, free or not: an allocated device
	// has left the slices by the time its claim is attached.
	blocks := map[[2]string]string{}
	for pool, devs := range Devices(o.Topology, func(*inventory.Block) bool { return true }) {
		for _, d := range devs {
			blocks[[2]string{pool, d.Name}] = *d.Attributes["block"].StringValue
		}
	}
	// The slices change when Follow says so (Update), not on a timer: the
	// controller's delay after its own informer's events stays short.
	delay := 100 * time.Millisecond
	// Failed devices are published tainted until the API server drops the
	// taints (DRADeviceTaints off): then they are left out instead.
	var taints atomic.Bool
	taints.Store(true)
	again := make(chan struct{}, 1)
	ctrl, err := resourceslice.StartController(ctx, resourceslice.Options{DriverName: DriverName, KubeClient: o.Kube, SyncDelay: &delay,
		ErrorHandler: func(_ context.Context, err error, msg string) {
			var dropped *resourceslice.DroppedFieldsError
			if errors.As(err, &dropped) && slices.Contains(dropped.DisabledFeatures(), "DRADeviceTaints") {
				if taints.Swap(false) {
					log.Warn("dra: the API server drops device taints (feature gate DRADeviceTaints off): failed devices are left out of the slices instead")
					select {
					case again <- struct{}{}:
					default:
					}
				}
				return
			}
			log.Error("dra: publish slices: "+msg, "err", err)
		}})
	if err != nil {
		return fmt.Errorf("dra: start the slice controller: %w", err)
	}
	defer ctrl.Stop()
	go Follow(ctx, o.Rackpool, o.Topology, ctrl.Update, &taints, again, log)
	a := &Attacher{Kube: o.Kube, Rackpool: o.Rackpool, BlockOf: func(pool, device string) (string, bool) {
		b, ok := blocks[[2]string{pool, device}]
		return b, ok
	}, Describe: func(id string) (api.HostDevice, bool) { return HostDevice(o.Topology.Block(id)) }}
	log.Info("dra: publishing rackpool's pool and attaching allocated devices", "driver", DriverName, "pools", len(blocks))
	grace := o.Grace
	if grace == 0 {
		grace = DefaultGrace
	}
	RunAttacher(ctx, a, grace, log)
	return nil
}
