package hoststep

import (
	"os"
	"path/filepath"
	"strings"
)

// isPartition reports whether block device name is a partition.
func (h *Host) isPartition(name string) bool {
	return exists(h.sys("class", "block", name, "partition"))
}

// partitions lists a disk's partitions (sdb1, nvme0n1p1).
func (h *Host) partitions(disk string) []string {
	entries, err := os.ReadDir(h.sys("class", "block", disk))
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		if exists(h.sys("class", "block", disk, e.Name(), "partition")) {
			out = append(out, e.Name())
		}
	}
	return out
}

// blockBusy says what uses a disk or any of its partitions, or "":
//   - a mount (ProcRoot/self/mountinfo by major:minor and by source, and
//     ProcRoot/mounts by source; a source under /dev/disk/by-* is
//     resolved under DevRoot);
//   - swap (ProcRoot/swaps);
//   - a holder (device-mapper, md, bcache: sysfs holders/);
//   - a process with the device node open (ProcRoot/<pid>/fd; processes
//     whose fds cannot be read, without the privilege to, are not seen).
func (h *Host) blockBusy(disk string) string {
	names := append([]string{disk}, h.partitions(disk)...)
	isOurs := map[string]bool{}
	devs := map[string]string{}
	for _, n := range names {
		isOurs[n] = true
		dir := h.sys("class", "block", n)
		if _, err := os.Stat(filepath.Join(dir, "partition")); err != nil && n != disk {
			dir = h.sys("class", "block", disk, n)
		}
		if d, err := readAttr(filepath.Join(dir, "dev")); err == nil {
			devs[d] = n
		}
		holders, _ := os.ReadDir(filepath.Join(dir, "holders"))
		if len(holders) > 0 {
			return n + " is held by " + holders[0].Name()
		}
	}
	var mounts []mount
	if b, err := os.ReadFile(h.proc("self", "mountinfo")); err == nil {
		mounts = append(mounts, parseMountinfo(b)...)
	}
	if b, err := os.ReadFile(h.proc("mounts")); err == nil {
		mounts = append(mounts, parseMounts(b)...)
	}
	for _, m := range mounts {
		if n, ok := devs[m.dev]; ok && m.dev != "" {
			return n + " is mounted on " + m.point
		}
		if n := h.devName(m.source); isOurs[n] {
			return n + " is mounted on " + m.point
		}
	}
	if b, err := os.ReadFile(h.proc("swaps")); err == nil {
		for _, s := range parseSwaps(b) {
			if n := h.devName(s); isOurs[n] {
				return n + " is used as swap"
			}
		}
	}
	var nodes []string
	for _, n := range names {
		nodes = append(nodes, "/dev/"+n)
	}
	return h.openBy(nodes)
}

// devName returns the kernel name of a device path under /dev
// ("/dev/disk/by-uuid/…" → "sdb1"), or "" for what is not under /dev.
func (h *Host) devName(src string) string {
	rel, ok := strings.CutPrefix(src, "/dev/")
	if !ok || rel == "" {
		return ""
	}
	if r, err := filepath.EvalSymlinks(filepath.Join(h.o.DevRoot, rel)); err == nil {
		return filepath.Base(r)
	}
	return filepath.Base(src)
}

// openBy names a process with one of nodes (paths under /dev) open:
// "/dev/nvidia0 is open by pid 812 (python3)", or "".
func (h *Host) openBy(nodes []string) string {
	if len(nodes) == 0 {
		return ""
	}
	want := map[string]bool{}
	for _, n := range nodes {
		want[n] = true
	}
	procs, err := os.ReadDir(h.o.ProcRoot)
	if err != nil {
		return ""
	}
	for _, p := range procs {
		if p.Name() == "" || strings.Trim(p.Name(), "0123456789") != "" {
			continue
		}
		fds, err := os.ReadDir(h.proc(p.Name(), "fd"))
		if err != nil {
			continue
		}
		for _, fd := range fds {
			target, err := os.Readlink(h.proc(p.Name(), "fd", fd.Name()))
			if err != nil || !want[target] {
				continue
			}
			comm, _ := readAttr(h.proc(p.Name(), "comm"))
			return target + " is open by pid " + p.Name() + " (" + comm + ")"
		}
	}
	return ""
}
