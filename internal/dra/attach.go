package dra

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	"rackpool/api"
	"rackpool/internal/inventory"
)

// Attacher composes what the scheduler allocated onto the allocated node's
// rackpool system and tells the scheduler, through the claim's
// status.devices, whether it did: ConditionAttached or
// ConditionAttachFailed, True.
//
// A node's devices go into one composed system of its host, named
// systemName(host): the first attach composes it (the host's compute block
// and the device), later ones expand it. Attaching is idempotent: a device
// already in the node's system is reported attached without a change, so a
// restarted controller repeats nothing.
type Attacher struct {
	Kube     kubernetes.Interface
	Rackpool *api.Client
	// BlockOf names the rackpool block of a published device (pool,
	// device name), false when it is none of ours.
	BlockOf func(pool, device string) (string, bool)
	// Describe says how the node finds a block (kind, PCI IDs, serial,
	// size); what it returns is written in the device's status data for
	// the node's kubelet plugin. Nil writes none.
	Describe func(block string) (api.HostDevice, bool)
}

// Release takes the devices this driver attached for claim (those whose
// status says ConditionAttached) off the node's system: a shrink, or the
// system's decompose when they were its last devices. A device already
// gone is no error: releasing twice changes nothing.
//
// Pooled memory is kept warm where the provisioning loop sizes the node's
// system (a subscription in effect On): the loop's forecast keeps what the
// node is expected to want again and gives the rest back, so the driver
// leaves memory to it (docs/kubernetes.md).
func (a *Attacher) Release(ctx context.Context, claim *resourceapi.ResourceClaim) error {
	alloc := claim.Status.Allocation
	if alloc == nil {
		return nil
	}
	var blocks []string
	for _, s := range claim.Status.Devices {
		if s.Driver != DriverName {
			continue
		}
		for _, c := range s.Conditions {
			if c.Type == ConditionAttached && c.Status == metav1.ConditionTrue {
				if b, ok := a.BlockOf(s.Pool, s.Device); ok {
					blocks = append(blocks, b)
				}
			}
		}
	}
	if len(blocks) == 0 {
		return nil
	}
	host, err := a.hostOf(ctx, alloc)
	if err != nil {
		return err
	}
	s, err := a.nodeSystem(ctx, host)
	if err != nil || s == nil {
		return err
	}
	var remove, memory []string
	devices := 0
	for _, b := range s.Oem.Rackpool.Blocks {
		if b.ID == host {
			continue
		}
		devices++
		if slices.Contains(blocks, b.ID) {
			remove = append(remove, b.ID)
			if b.Kind == string(inventory.Memory) {
				memory = append(memory, b.ID)
			}
		}
	}
	if len(memory) > 0 {
		sub, err := a.Rackpool.Subscription(ctx, s.ID)
		var ae *api.Error
		switch {
		case err == nil && sub.Effective == "On":
			remove = slices.DeleteFunc(remove, func(id string) bool { return slices.Contains(memory, id) })
		case err != nil && !(errors.As(err, &ae) && ae.Status == http.StatusNotFound):
			return fmt.Errorf("system %s: its provisioning subscription: %w", s.ID, err)
		}
	}
	switch {
	case len(remove) == 0:
		return nil
	case len(remove) == devices:
		return a.Rackpool.Decompose(ctx, s.ID)
	}
	_, err = a.Rackpool.Expand(ctx, s.ID, nil, nil, remove)
	return err
}

// nodeSystem is host's composed system for Kubernetes, nil when there is
// none.
func (a *Attacher) nodeSystem(ctx context.Context, host string) (*api.System, error) {
	systems, err := a.Rackpool.Systems(ctx)
	if err != nil {
		return nil, err
	}
	for i, s := range systems {
		if s.SystemType == "Composed" && s.Oem.Rackpool.Host == host && s.Name == systemName(host) {
			return &systems[i], nil
		}
	}
	return nil, nil
}

// systemName is the name of the composed system that holds host's devices
// for Kubernetes.
func systemName(host string) string { return "k8s " + host }

// Reconcile settles the binding conditions of claim's devices of this
// driver that have none yet, and writes them to the claim's status. A
// claim not allocated, or allocated nothing of ours, is left as it is.
func (a *Attacher) Reconcile(ctx context.Context, claim *resourceapi.ResourceClaim) error {
	alloc := claim.Status.Allocation
	if alloc == nil {
		return nil
	}
	var pending []resourceapi.DeviceRequestAllocationResult
	for _, r := range alloc.Devices.Results {
		if r.Driver == DriverName && len(r.BindingConditions) > 0 && !settled(claim, r) {
			pending = append(pending, r)
		}
	}
	if len(pending) == 0 {
		return nil
	}
	host, err := a.hostOf(ctx, alloc)
	statuses := slices.Clone(claim.Status.Devices)
	for _, r := range pending {
		cond := metav1.Condition{Type: ConditionAttached, Status: metav1.ConditionTrue, Reason: "Composed",
			ObservedGeneration: claim.Generation, LastTransitionTime: metav1.Now()}
		st := resourceapi.AllocatedDeviceStatus{Driver: r.Driver, Pool: r.Pool, Device: r.Device}
		attachErr := err
		if attachErr == nil {
			block, ok := a.BlockOf(r.Pool, r.Device)
			if !ok {
				attachErr = fmt.Errorf("device %s/%s is none of rackpool's published devices", r.Pool, r.Device)
			} else {
				attachErr = a.attach(ctx, host, block)
				cond.Message = fmt.Sprintf("block %s composed onto host %s's system", block, host)
				if a.Describe != nil {
					if hd, ok := a.Describe(block); ok {
						raw, _ := json.Marshal(hd) // plain strings and an integer: cannot fail
						st.Data = &runtime.RawExtension{Raw: raw}
					}
				}
			}
		}
		if transient(attachErr) {
			// Nothing was decided: try again (the queue backs off)
			// rather than fail a claim rackpool never saw.
			return fmt.Errorf("claim %s/%s: attach %s/%s: %w", claim.Namespace, claim.Name, r.Pool, r.Device, attachErr)
		}
		if attachErr != nil {
			cond.Type, cond.Reason, cond.Message = ConditionAttachFailed, "AttachFailed", attachErr.Error()
			st.Data = nil
		}
		st.Conditions = []metav1.Condition{cond}
		statuses = append(statuses, st)
	}
	updated := claim.DeepCopy()
	updated.Status.Devices = statuses
	if _, err := a.Kube.ResourceV1().ResourceClaims(claim.Namespace).UpdateStatus(ctx, updated, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("claim %s/%s: write the binding conditions: %w", claim.Namespace, claim.Name, err)
	}
	return nil
}

// settled reports whether the claim's status already holds a binding
// condition of r's device.
func settled(claim *resourceapi.ResourceClaim, r resourceapi.DeviceRequestAllocationResult) bool {
	for _, s := range claim.Status.Devices {
		if s.Driver != r.Driver || s.Pool != r.Pool || s.Device != r.Device {
			continue
		}
		for _, c := range s.Conditions {
			if (c.Type == ConditionAttached || c.Type == ConditionAttachFailed) && c.Status == metav1.ConditionTrue {
				return true
			}
		}
	}
	return false
}

// hostOf is the rackpool host of the node an allocation that binds to a
// node was made for: the node BindsToNode's selector names, and the host
// its HostLabel names.
func (a *Attacher) hostOf(ctx context.Context, alloc *resourceapi.AllocationResult) (string, error) {
	node := ""
	if sel := alloc.NodeSelector; sel != nil {
		for _, term := range sel.NodeSelectorTerms {
			for _, f := range term.MatchFields {
				if f.Key == "metadata.name" && len(f.Values) == 1 {
					node = f.Values[0]
				}
			}
		}
	}
	if node == "" {
		return "", fmt.Errorf("the allocation names no node (%v)", alloc.NodeSelector)
	}
	n, err := a.Kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("node %s: %w", node, err)
	}
	host := n.Labels[HostLabel]
	if host == "" {
		return "", fmt.Errorf("node %s has no %s label naming its rackpool host", node, HostLabel)
	}
	return host, nil
}

// attach composes block onto host's system for Kubernetes: done when it is
// there already; an expand of the system when it exists; a compose of the
// host and the block when not.
func (a *Attacher) attach(ctx context.Context, host, block string) error {
	s, err := a.nodeSystem(ctx, host)
	if err != nil {
		return err
	}
	if s != nil {
		for _, l := range s.Links.ResourceBlocks {
			if strings.HasSuffix(l.ID, "/"+block) {
				return nil
			}
		}
		_, err := a.Rackpool.Expand(ctx, s.ID, []string{block}, nil, nil)
		return err
	}
	_, err = a.Rackpool.Compose(ctx, api.ComposeRequest{Name: systemName(host), Blocks: []string{host, block}})
	return err
}

// transient reports whether err says nothing about the attach itself:
// rackpool (or the API server) could not be reached, or rackpool answered
// 503 (it cannot decide now). A refusal, a failed fabric operation, a node
// without its label are answers, not transient.
func transient(err error) bool {
	var ae *api.Error
	if errors.As(err, &ae) {
		return ae.Status == http.StatusServiceUnavailable
	}
	var ue *url.Error
	return errors.As(err, &ue)
}
