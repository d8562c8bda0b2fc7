package hoststep

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
)

// pciFunc is one function under bus/pci/devices.
type pciFunc struct {
	bdf            string // 0000:03:00.0
	vendor, device string // normalized: 0x10de
}

func (f pciFunc) vd() string { return f.vendor + ":" + f.device }

func hasIDs(d Device) bool { return normID(d.VendorID) != "" && normID(d.DeviceID) != "" }

func vdOf(d Device) string { return normID(d.VendorID) + ":" + normID(d.DeviceID) }

// pciFunctions lists the PCI functions the kernel knows, by address.
// A function whose IDs cannot be read (it is going away) is left out.
func (h *Host) pciFunctions() []pciFunc {
	entries, err := os.ReadDir(h.sys("bus", "pci", "devices"))
	if err != nil {
		return nil
	}
	var out []pciFunc
	for _, e := range entries {
		v, err1 := readAttr(h.sys("bus", "pci", "devices", e.Name(), "vendor"))
		d, err2 := readAttr(h.sys("bus", "pci", "devices", e.Name(), "device"))
		if err1 != nil || err2 != nil || normID(v) == "" || normID(d) == "" {
			continue
		}
		out = append(out, pciFunc{bdf: e.Name(), vendor: normID(v), device: normID(d)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].bdf < out[j].bdf })
	return out
}

// matching returns the addresses of the functions with vendor:device vd,
// lowest first.
func matching(funcs []pciFunc, vd string) []string {
	var out []string
	for _, f := range funcs {
		if f.vd() == vd {
			out = append(out, f.bdf)
		}
	}
	return out
}

// pciHealth says why a function is unhealthy, or "" when it is not:
//   - current_link_width (PCIe functions with a link) reads 0: the link
//     is down;
//   - aer_dev_fatal (kernels with AER) counts fatal errors
//     (TOTAL_ERR_FATAL > 0).
//
// Attributes a function lacks are not checked.
func (h *Host) pciHealth(bdf string) string {
	if w, err := readAttr(h.sys("bus", "pci", "devices", bdf, "current_link_width")); err == nil {
		if n, err := strconv.Atoi(w); err == nil && n == 0 {
			return "PCIe link down (current_link_width 0)"
		}
	}
	if s, err := os.ReadFile(h.sys("bus", "pci", "devices", bdf, "aer_dev_fatal")); err == nil {
		if n, ok := parseAERFatal(string(s)); ok && n > 0 {
			return fmt.Sprintf("%d fatal AER errors (aer_dev_fatal)", n)
		}
	}
	return ""
}

// checkPCI decides which functions are devs. Per vendor:device, the
// number of matching functions must reach the number of devices of have
// and devs together with it; devs are then given, in order, the function
// they claimed before, functions that appeared since the attach began
// (before), and the highest-addressed functions left. A device without
// IDs cannot be checked and passes.
func (h *Host) checkPCI(devs, all []Device, before map[string]bool) []outcome {
	if len(devs) == 0 {
		return nil
	}
	funcs := h.pciFunctions()
	var outs []outcome
	for _, group := range groupByVD(devs) {
		vd := vdOf(group[0])
		if !hasIDs(group[0]) {
			for _, d := range group {
				outs = append(outs, outcome{dev: d})
			}
			continue
		}
		matches := matching(funcs, vd)
		need := 0
		for _, d := range all {
			if hasIDs(d) && vdOf(d) == vd {
				need++
			}
		}
		if len(matches) < need {
			for _, d := range group {
				outs = append(outs, outcome{dev: d, err: fmt.Errorf("%d of %d PCI functions %s present: %w", len(matches), need, vd, ErrNotVisible)})
			}
			continue
		}
		assigned := h.assignPCI(group, matches, before)
		for _, d := range group {
			bdf := assigned[d.key()]
			o := outcome{dev: d, found: []string{bdf}}
			if why := h.pciHealth(bdf); why != "" {
				o.err = fmt.Errorf("%s: %s: %w", bdf, why, ErrUnhealthy)
			}
			outs = append(outs, o)
		}
	}
	return outs
}

// assignPCI gives each device of group one of matches (there are enough).
func (h *Host) assignPCI(group []Device, matches []string, before map[string]bool) map[string]string {
	taken := map[string]bool{}
	out := map[string]string{}
	var rest []Device
	for _, d := range group {
		if c := h.claims[d.key()]; len(c) == 1 && contains(matches, c[0]) {
			out[d.key()], taken[c[0]] = c[0], true
		} else {
			rest = append(rest, d)
		}
	}
	// New functions first, lowest first; then the highest of the others.
	var order []string
	for _, m := range matches {
		if !before[m] {
			order = append(order, m)
		}
	}
	for i := len(matches) - 1; i >= 0; i-- {
		if before[matches[i]] {
			order = append(order, matches[i])
		}
	}
	for _, d := range rest {
		for _, m := range order {
			if !taken[m] && (h.claimedBy(m) == "" || h.claimedBy(m) == d.key()) {
				out[d.key()], taken[m] = m, true
				break
			}
		}
		if out[d.key()] == "" { // every candidate is claimed by another block
			for _, m := range order {
				if !taken[m] {
					out[d.key()], taken[m] = m, true
					break
				}
			}
		}
	}
	return out
}

func groupByVD(devs []Device) [][]Device {
	idx := map[string]int{}
	var out [][]Device
	for _, d := range devs {
		k := vdOf(d)
		if !hasIDs(d) {
			k = "?" + d.key() // devices without IDs are each their own group
		}
		i, ok := idx[k]
		if !ok {
			i = len(out)
			idx[k] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], d)
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func (h *Host) rescanPCI(rep *Report) error {
	if err := h.write(h.sys("bus", "pci", "rescan"), "1"); err != nil {
		return fmt.Errorf("pci rescan: %w", err)
	}
	rep.add(nil, "pci-rescan")
	return nil
}

// planPCI chooses the functions to remove for devs and checks that none
// is in use. Per vendor:device, as many functions stay as have and devs
// together count beyond devs; of the others, a function a device claimed
// is removed first, then the highest-addressed ones not claimed by a
// device that stays. A device without IDs is left to the fabric.
func (h *Host) planPCI(devs, all []Device, rep *Report) ([]removal, error) {
	if len(devs) == 0 {
		return nil, nil
	}
	funcs := h.pciFunctions()
	leaving := map[string]bool{}
	for _, d := range devs {
		leaving[d.key()] = true
	}
	var out []removal
	for _, group := range groupByVD(devs) {
		if !hasIDs(group[0]) {
			rep.add(&group[0], "no vendor:device: left to the fabric")
			continue
		}
		vd := vdOf(group[0])
		matches := matching(funcs, vd)
		keep := 0
		for _, d := range all {
			if !leaving[d.key()] && hasIDs(d) && vdOf(d) == vd {
				keep++
			}
		}
		chosen := map[string]bool{}
		pick := func(d Device, bdf string) {
			chosen[bdf] = true
			out = append(out, h.pciRemoval(d, bdf))
		}
		var rest []Device
		for _, d := range group {
			if c := h.claims[d.key()]; len(c) == 1 && contains(matches, c[0]) && len(matches)-len(chosen) > keep {
				pick(d, c[0])
			} else {
				rest = append(rest, d)
			}
		}
		for _, d := range rest {
			var bdf string
			for i := len(matches) - 1; i >= 0 && len(matches)-len(chosen) > keep; i-- {
				m := matches[i]
				if chosen[m] {
					continue
				}
				if owner := h.claimedBy(m); owner != "" && owner != d.key() && !leaving[owner] {
					continue
				}
				bdf = m
				break
			}
			if bdf == "" {
				rep.add(&d, "already gone (%d PCI functions %s present, %d stay)", len(matches)-len(chosen), vd, keep)
				continue
			}
			pick(d, bdf)
		}
	}
	for _, r := range out {
		if why := h.pciBusy(r.name); why != "" {
			return nil, fmt.Errorf("detach %s: %s %s: %w", r.dev, r.name, why, ErrBusy)
		}
	}
	return out, nil
}

func (h *Host) pciRemoval(d Device, bdf string) removal {
	dir := h.sys("bus", "pci", "devices", bdf)
	return removal{
		dev:  d,
		name: bdf,
		do:   func() error { return h.write(dir+"/remove", "1") },
		gone: func() bool { return !exists(dir) },
	}
}

// pciBusy says what uses a PCI function, or "": its block devices
// (NVMe namespaces) mounted, swapped on, held or open; its network
// interfaces up; its DRM nodes or NVIDIA device node open by a process.
func (h *Host) pciBusy(bdf string) string {
	dir := h.sys("bus", "pci", "devices", bdf)
	for _, b := range classDevicesUnder(h.o.SysfsRoot, "block", dir) {
		if h.isPartition(b) {
			continue
		}
		if why := h.blockBusy(b); why != "" {
			return why
		}
	}
	for _, n := range classDevicesUnder(h.o.SysfsRoot, "net", dir) {
		flags, err := readAttr(h.sys("class", "net", n, "flags"))
		if err != nil {
			continue
		}
		if v, err := parseHex(flags); err == nil && v&1 != 0 {
			return "network interface " + n + " is up"
		}
	}
	var nodes []string
	for _, n := range classDevicesUnder(h.o.SysfsRoot, "drm", dir) {
		if strings.HasPrefix(n, "card") || strings.HasPrefix(n, "renderD") {
			nodes = append(nodes, "/dev/dri/"+n)
		}
	}
	if info, err := os.ReadFile(h.proc("driver", "nvidia", "gpus", bdf, "information")); err == nil {
		for _, line := range strings.Split(string(info), "\n") {
			k, v, ok := strings.Cut(line, ":")
			if ok && strings.TrimSpace(k) == "Device Minor" {
				nodes = append(nodes, "/dev/nvidia"+strings.TrimSpace(v))
			}
		}
	}
	return h.openBy(nodes)
}
