package dra

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"rackpool/api"
	"rackpool/internal/hostagent/hoststep"
)

// DefaultPrepareWait is how long NodePlugin waits for the host to see a
// device: below the kubelet's 45 s limit on a NodePrepareResources call.
const DefaultPrepareWait = 30 * time.Second

// NodePlugin is the driver's kubelet plugin, run by the host agent of the
// node's rackpool host (`rackpool agent --dra-node`). The controller has
// composed a claim's devices onto the host by the time the kubelet
// prepares it (the pod waited for ConditionAttached); the plugin makes
// sure the host's OS sees each (hoststep.Host.Locate: nothing to do when
// the agent's own attach step found it, a rescan when the host has no such
// step), writes a CDI spec for the claim with the devices' nodes and
// variables, and answers the CDI device IDs. Unprepare removes the spec;
// taking the devices off the host is the controller's release.
//
// What a device is comes from the claim's status (the data the controller
// wrote beside ConditionAttached); what the node holds is in the CDI specs
// themselves, so a restarted agent, or another instance of it, unprepares
// and checks for double use as well as the one that prepared.
type NodePlugin struct {
	Host *hoststep.Host
	// CDIDir is where the specs go (DefaultCDIDir when empty).
	CDIDir string
	// Wait bounds how long a prepare waits for the host to see a device
	// (DefaultPrepareWait when 0).
	Wait   time.Duration
	Logger *slog.Logger

	mu       sync.Mutex
	loaded   bool
	prepared map[types.UID][]api.HostDevice
}

var _ kubeletplugin.DRAPlugin = (*NodePlugin)(nil)

func (p *NodePlugin) dir() string {
	if p.CDIDir == "" {
		return DefaultCDIDir
	}
	return p.CDIDir
}

func (p *NodePlugin) log() *slog.Logger {
	if p.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return p.Logger
}

// load reads what the specs say this node holds, once.
func (p *NodePlugin) load() {
	if p.loaded {
		return
	}
	prepared, err := readPrepared(p.dir())
	if err != nil {
		p.log().Warn("dra: a CDI spec of this driver cannot be read; its claim is not counted", "err", err)
	}
	p.prepared, p.loaded = prepared, true
}

// PrepareResourceClaims prepares each claim's devices of this driver (see
// NodePlugin). A claim whose device is not attached, is already prepared
// for another claim, or does not show on the host within Wait fails alone,
// with the reason; the others are prepared.
func (p *NodePlugin) PrepareResourceClaims(ctx context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.load()
	out := map[types.UID]kubeletplugin.PrepareResult{}
	for _, c := range claims {
		devs, err := p.prepare(ctx, c)
		if err != nil {
			err = fmt.Errorf("claim %s/%s: %w", c.Namespace, c.Name, err)
			p.log().Warn("dra: prepare", "err", err)
		}
		out[c.UID] = kubeletplugin.PrepareResult{Devices: devs, Err: err}
	}
	return out, nil
}

func (p *NodePlugin) prepare(ctx context.Context, claim *resourceapi.ResourceClaim) ([]kubeletplugin.Device, error) {
	if claim.Status.Allocation == nil {
		return nil, errors.New("not allocated")
	}
	type item struct {
		r  resourceapi.DeviceRequestAllocationResult
		hd api.HostDevice
	}
	var items []item
	for _, r := range claim.Status.Allocation.Devices.Results {
		if r.Driver != DriverName {
			continue
		}
		hd, err := attachedDevice(claim, r)
		if err != nil {
			return nil, err
		}
		items = append(items, item{r, hd})
	}
	// The last line of defence against two workloads on one device.
	for uid, held := range p.prepared {
		if uid == claim.UID {
			continue
		}
		for _, it := range items {
			for _, h := range held {
				if h.Block == it.hd.Block {
					return nil, fmt.Errorf("device %s (block %s) is prepared for claim %s on this node: %w", it.r.Device, h.Block, uid, ErrInUse)
				}
			}
		}
	}
	var devs, have []hoststep.Device
	for _, it := range items {
		devs = append(devs, hostDevice(it.hd))
	}
	for uid, held := range p.prepared {
		if uid != claim.UID {
			for _, h := range held {
				have = append(have, hostDevice(h))
			}
		}
	}
	wait := p.Wait
	if wait == 0 {
		wait = DefaultPrepareWait
	}
	lctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	start := time.Now()
	locs, rep, err := p.Host.Locate(lctx, devs, append(have, devs...))
	if err != nil {
		return nil, fmt.Errorf("the host does not show its devices: %w", err)
	}
	var done []string
	for _, s := range rep.Steps {
		done = append(done, s.String())
	}
	spec := &cdispec.Spec{Kind: CDIKind, Annotations: map[string]string{}}
	var held []api.HostDevice
	var out []kubeletplugin.Device
	for _, it := range items {
		loc := locs[hostDevice(it.hd).Block]
		if it.hd.Block == "" {
			loc = locs[it.hd.Device]
		}
		e := envName(it.r.Device)
		edits := cdispec.ContainerEdits{Env: []string{
			"RACKPOOL_DEVICE_" + e + "=" + it.hd.Block,
			"RACKPOOL_KIND_" + e + "=" + it.hd.Kind,
		}}
		if len(loc.Names) > 0 {
			edits.Env = append(edits.Env, "RACKPOOL_OS_NAMES_"+e+"="+strings.Join(loc.Names, ","))
		}
		for _, n := range loc.Nodes {
			edits.DeviceNodes = append(edits.DeviceNodes, &cdispec.DeviceNode{Path: n.Path, HostPath: n.HostPath})
		}
		spec.Devices = append(spec.Devices, cdispec.Device{Name: cdiName(claim.UID, it.r.Device), ContainerEdits: edits})
		held = append(held, it.hd)
		out = append(out, kubeletplugin.Device{Requests: []string{it.r.Request}, PoolName: it.r.Pool, DeviceName: it.r.Device,
			CDIDeviceIDs: []string{CDIDeviceID(claim.UID, it.r.Device)}})
	}
	raw, _ := json.Marshal(held) // strings and integers: cannot fail
	spec.Annotations[cdiDevicesAnnotation] = string(raw)
	if err := writeSpec(cdiFile(p.dir(), claim.UID), spec); err != nil {
		return nil, err
	}
	p.prepared[claim.UID] = held
	p.log().Info("dra: prepared", "claim", claim.Namespace+"/"+claim.Name, "uid", claim.UID, "devices", len(out),
		"took", time.Since(start), "host", strings.Join(done, "; "))
	return out, nil
}

// ErrInUse is a device prepared for another claim on this node.
var ErrInUse = errors.New("device in use")

// attachedDevice is what the controller recorded for r's device: the
// device must carry ConditionAttached, True, and its data.
func attachedDevice(claim *resourceapi.ResourceClaim, r resourceapi.DeviceRequestAllocationResult) (api.HostDevice, error) {
	for _, s := range claim.Status.Devices {
		if s.Driver != r.Driver || s.Pool != r.Pool || s.Device != r.Device {
			continue
		}
		if !slices.ContainsFunc(s.Conditions, func(c metav1.Condition) bool {
			return c.Type == ConditionAttached && c.Status == metav1.ConditionTrue
		}) {
			break
		}
		var hd api.HostDevice
		if s.Data == nil || json.Unmarshal(s.Data.Raw, &hd) != nil || hd.Kind == "" || hd.Block == "" {
			return api.HostDevice{}, fmt.Errorf("device %s/%s: the controller recorded no description of it (upgrade rackpool dra)", r.Pool, r.Device)
		}
		return hd, nil
	}
	return api.HostDevice{}, fmt.Errorf("device %s/%s is not attached (no %s condition): the controller composes it first", r.Pool, r.Device, ConditionAttached)
}

func hostDevice(d api.HostDevice) hoststep.Device {
	return hoststep.Device{Block: d.Block, Device: d.Device, Kind: d.Kind, VendorID: d.VendorID, DeviceID: d.DeviceID,
		Serial: d.Serial, Bytes: d.Bytes}
}

// UnprepareResourceClaims removes each claim's CDI spec. A claim not
// prepared (or unprepared before) is no error.
func (p *NodePlugin) UnprepareResourceClaims(_ context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.load()
	out := map[types.UID]error{}
	for _, c := range claims {
		err := os.Remove(cdiFile(p.dir(), c.UID))
		if errors.Is(err, fs.ErrNotExist) {
			err = nil
		}
		if err == nil {
			delete(p.prepared, c.UID)
			p.log().Info("dra: unprepared", "claim", c.String(), "uid", c.UID)
		} else {
			err = fmt.Errorf("claim %s: remove its CDI spec: %w", c, err)
		}
		out[c.UID] = err
	}
	return out, nil
}

// HandleError logs errors of the helper's background work; the plugin
// publishes no slices (the controller does), so none is fatal.
func (p *NodePlugin) HandleError(_ context.Context, err error, msg string) {
	p.log().Error("dra: kubelet plugin: "+msg, "err", err)
}

// WatchHealthStatus is not supported yet: the controller withholds devices
// rackpool reports failed, which covers a device before it is allocated.
func (p *NodePlugin) WatchHealthStatus(context.Context, chan<- kubeletplugin.DeviceHealthReport) error {
	return kubeletplugin.ErrHealthNotSupported
}
