package hoststep

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Node is a device node the OS made for a device: Path is its name in a
// container (/dev/nvme0n1), HostPath the same node under Options.DevRoot.
type Node struct {
	Path, HostPath string
}

// Location is where the host's OS shows one device.
type Location struct {
	// Names are the OS names the Host found or made for the device: a
	// PCI function's address (0000:03:00.0), a SCSI disk (sdb), memory
	// blocks (memory32 ...). Empty for a PCI device without IDs, which
	// cannot be told apart from others.
	Names []string
	// Nodes are the device nodes a workload opens: an NVMe controller
	// and its namespaces, a GPU's DRM card and render nodes or NVIDIA's
	// /dev/nvidiaN, a SCSI disk. Only nodes that exist under DevRoot.
	Nodes []Node
}

// Locate makes the OS see devs, as Attach does (rescanning only when one
// is not yet visible, so a device the host agent's attach step already
// found costs no write), and says where each is, by Device.Block (or
// Device.Device when Block is empty). have is as for Attach.
func (h *Host) Locate(ctx context.Context, devs, have []Device) (map[string]Location, Report, error) {
	rep, err := h.Attach(ctx, devs, have)
	if err != nil {
		return nil, rep, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string]Location{}
	for _, d := range devs {
		names := append([]string(nil), h.claims[d.key()]...)
		loc := Location{Names: names}
		for _, n := range names {
			loc.Nodes = append(loc.Nodes, h.nodesOf(classOf(d.Kind), n)...)
		}
		out[d.key()] = loc
	}
	return out, rep, nil
}

// nodesOf lists the device nodes of OS name n of class c that exist.
func (h *Host) nodesOf(c class, n string) []Node {
	var rel []string
	switch c {
	case classSCSI:
		rel = []string{n}
	case classPCI:
		fn := h.sys("bus", "pci", "devices", n)
		// NVMe: the controller's character device and its namespaces.
		for _, ctrl := range subdirs(filepath.Join(fn, "nvme")) {
			rel = append(rel, ctrl)
			for _, ns := range subdirs(filepath.Join(fn, "nvme", ctrl)) {
				if strings.HasPrefix(ns, ctrl+"n") {
					rel = append(rel, ns)
				}
			}
		}
		// DRM (most GPUs): /dev/dri/cardN and /dev/dri/renderDN.
		for _, d := range subdirs(filepath.Join(fn, "drm")) {
			if strings.HasPrefix(d, "card") || strings.HasPrefix(d, "renderD") {
				rel = append(rel, filepath.Join("dri", d))
			}
		}
		// NVIDIA's driver: /dev/nvidiaN, N its "Device Minor".
		if minor, ok := h.nvidiaMinor(n); ok {
			rel = append(rel, "nvidia"+strconv.Itoa(minor), "nvidiactl", "nvidia-uvm")
		}
	}
	var out []Node
	for _, r := range rel {
		host := filepath.Join(h.o.DevRoot, r)
		if _, err := os.Stat(host); err == nil {
			out = append(out, Node{Path: "/dev/" + r, HostPath: host})
		}
	}
	return out
}

// nvidiaMinor reads the device minor NVIDIA's driver gave the GPU at bdf
// (driver/nvidia/gpus/BDF/information under the proc root).
func (h *Host) nvidiaMinor(bdf string) (int, bool) {
	b, err := os.ReadFile(h.proc("driver", "nvidia", "gpus", bdf, "information"))
	if err != nil {
		return 0, false
	}
	for line := range strings.Lines(string(b)) {
		k, v, ok := strings.Cut(line, ":")
		if ok && strings.TrimSpace(k) == "Device Minor" {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			return n, err == nil && n >= 0
		}
	}
	return 0, false
}

// subdirs lists the names in dir (entries that are directories or links
// to them, as sysfs shows devices), sorted; none when dir cannot be read.
func subdirs(dir string) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		if fi, err := os.Stat(filepath.Join(dir, e.Name())); err == nil && fi.IsDir() {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out
}
