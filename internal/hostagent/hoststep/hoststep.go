package hoststep

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"rackpool/internal/inventory"
)

// Device is one device of a composition as the host sees it.
type Device struct {
	Block    string // resource block ID
	Device   string // device ID
	Kind     string // inventory.Kind: gpu, fpga, nvme, ssd, hdd, nic, memory
	VendorID string // PCI vendor ID like "0x10de" (PCIe devices; may be empty)
	DeviceID string // PCI device ID like "0x20b0" (PCIe devices; may be empty)
	// Serial is the drive's WWN or serial when the topology gives one
	// (Attrs["serial"] / Attrs["wwn"]); may be empty.
	Serial string
	Bytes  int64 // capacity (memory: bytes to online)
}

func (d Device) key() string {
	if d.Block != "" {
		return d.Block
	}
	return d.Device
}

func (d Device) String() string {
	if d.Block == "" || d.Block == d.Device {
		return d.Device
	}
	return d.Device + " (block " + d.Block + ")"
}

// class says how the host finds a device: on the PCI bus, as a SCSI disk,
// or as hot-plugged memory blocks.
type class int

const (
	classNone class = iota
	classPCI
	classSCSI
	classMemory
)

func classOf(kind string) class {
	switch inventory.Kind(kind) {
	case inventory.GPU, inventory.FPGA, inventory.NVMe, inventory.NIC:
		return classPCI
	case inventory.SSD, inventory.HDD:
		return classSCSI
	case inventory.Memory:
		return classMemory
	}
	return classNone
}

// Defaults of Options.
const (
	DefaultPoll   = 50 * time.Millisecond
	DefaultRescan = time.Second
)

// Options configure a Host. The zero value reads and writes the real
// /sys, /proc and /dev.
type Options struct {
	SysfsRoot string        // default "/sys"
	ProcRoot  string        // default "/proc" (mounts, swaps, processes' open files)
	DevRoot   string        // default "/dev" (resolving /dev/disk/by-* names of mounts)
	Poll      time.Duration // how often to look again while waiting; default 50ms
	// Rescan is how often an attach that is still waiting rescans the
	// PCI bus and SCSI hosts again (a link may train after the first
	// rescan); default 1s.
	Rescan time.Duration
	Logger *slog.Logger // default: discard
}

// Validate reports options that cannot work.
func (o Options) Validate() error {
	if o.Poll < 0 || o.Rescan < 0 {
		return errors.New("hoststep: Poll and Rescan must not be negative")
	}
	return nil
}

// Host runs the host-side steps of attach and detach on one machine. Its
// methods are safe for concurrent use; they run one at a time, because
// each decides from what the whole host shows (how many functions match a
// vendor:device, which memory blocks are offline).
type Host struct {
	o     Options
	log   *slog.Logger
	write func(path, value string) error // writeAttr; tests inject faults

	mu sync.Mutex
	// claims maps a block (Device.key) to the OS names this Host found
	// or made for it: a PCI function's address, a disk's name, memory
	// blocks. They make retries and detaches exact where counting alone
	// could not tell devices apart; they live only as long as the Host.
	claims map[string][]string
	// baseline holds the SCSI disks present when the Host was made (by
	// identity, see diskIdentity): a drive without a serial is taken to be
	// one that appeared since.
	baseline map[string]bool
}

// New returns a Host reading and writing under o's roots. It fails when
// the sysfs root does not exist.
func New(o Options) (*Host, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.SysfsRoot == "" {
		o.SysfsRoot = "/sys"
	}
	if o.ProcRoot == "" {
		o.ProcRoot = "/proc"
	}
	if o.DevRoot == "" {
		o.DevRoot = "/dev"
	}
	if o.Poll == 0 {
		o.Poll = DefaultPoll
	}
	if o.Rescan == 0 {
		o.Rescan = DefaultRescan
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if _, err := os.Stat(o.SysfsRoot); err != nil {
		return nil, fmt.Errorf("hoststep: sysfs root: %w", err)
	}
	h := &Host{o: o, log: o.Logger, write: writeAttr, claims: map[string][]string{}, baseline: map[string]bool{}}
	for _, d := range h.scsiDisks() {
		h.baseline[d.identity] = true
	}
	return h, nil
}

func (h *Host) sys(p ...string) string {
	return filepath.Join(append([]string{h.o.SysfsRoot}, p...)...)
}

func (h *Host) proc(p ...string) string {
	return filepath.Join(append([]string{h.o.ProcRoot}, p...)...)
}

// StepResult is one thing a step did or found.
type StepResult struct {
	Block  string // "" for what concerns the whole host (a rescan)
	Device string
	Step   string // "pci-rescan", "found 0000:03:00.0", "scsi-scan host2", "memory online memory32..39", ...
}

func (s StepResult) String() string {
	if s.Device == "" {
		return s.Step
	}
	return Device{Block: s.Block, Device: s.Device}.String() + ": " + s.Step
}

// Report says what a step did, in order.
type Report struct {
	Steps []StepResult
}

func (r *Report) add(d *Device, format string, args ...any) {
	s := StepResult{Step: fmt.Sprintf(format, args...)}
	if d != nil {
		s.Block, s.Device = d.Block, d.Device
	}
	r.Steps = append(r.Steps, s)
}

// union is have and devs together, one entry per block (devs win).
func union(have, devs []Device) []Device {
	seen := map[string]bool{}
	var out []Device
	for _, d := range devs {
		if !seen[d.key()] {
			seen[d.key()] = true
			out = append(out, d)
		}
	}
	for _, d := range have {
		if !seen[d.key()] {
			seen[d.key()] = true
			out = append(out, d)
		}
	}
	return out
}

// sortOut splits devs by class; devices of no class become errors.
func sortOut(devs []Device) (by map[class][]Device, errs []error) {
	by = map[class][]Device{}
	seen := map[string]bool{}
	for _, d := range devs {
		if seen[d.key()] {
			continue
		}
		seen[d.key()] = true
		c := classOf(d.Kind)
		if c == classNone {
			errs = append(errs, fmt.Errorf("%s: kind %q: %w", d, d.Kind, ErrUnsupported))
			continue
		}
		by[c] = append(by[c], d)
	}
	return by, errs
}

// outcome is what a check found for one device.
type outcome struct {
	dev   Device
	found []string // OS names
	err   error    // nil when visible and healthy; wraps ErrNotVisible or ErrUnhealthy
}

// Attach makes the OS see devs, which the fabric has just attached to
// this host, and waits until each is visible and healthy, or ctx ends.
// have lists the devices attached to this host before this step (devs
// may be in it too): PCI functions are counted by vendor:device, so the
// count to reach is that of have and devs together.
//
// Attach is idempotent: when every device is already visible and healthy
// it writes nothing (no rescan) and reports what it found. Otherwise it
// rescans the PCI bus (bus/pci/rescan) and every SCSI host
// (scsi_host/*/scan) that a waiting device needs, and again every
// Options.Rescan while it waits. Memory is onlined as it is found
// offline. When ctx ends first the error joins one error per device not
// ready, wrapping ErrNotVisible or ErrUnhealthy and ctx's error. A
// device of an unknown kind fails with ErrUnsupported and the others are
// still attached.
func (h *Host) Attach(ctx context.Context, devs, have []Device) (Report, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var rep Report
	by, errs := sortOut(devs)
	all := union(have, devs)
	before := map[string]bool{}
	for _, f := range h.pciFunctions() {
		before[f.bdf] = true
	}
	memFailed := map[string]error{}
	var lastScan time.Time
	rescanned := false
	for {
		var pending []outcome
		var done []outcome
		for _, c := range []class{classPCI, classSCSI, classMemory} {
			var outs []outcome
			switch c {
			case classPCI:
				outs = h.checkPCI(by[c], all, before)
			case classSCSI:
				outs = h.checkSCSI(by[c], all)
			case classMemory:
				outs = h.onlineMemory(by[c], &rep, memFailed)
			}
			for _, o := range outs {
				if o.err != nil {
					pending = append(pending, o)
				} else {
					done = append(done, o)
				}
			}
		}
		// A PCI device without IDs cannot be confirmed; it gets one
		// rescan all the same.
		blind := false
		for _, d := range by[classPCI] {
			blind = blind || !hasIDs(d)
		}
		if len(pending) == 0 && (!blind || rescanned) {
			for _, o := range done {
				h.claims[o.dev.key()] = o.found
				switch {
				case classOf(o.dev.Kind) == classPCI && !hasIDs(o.dev):
					rep.add(&o.dev, "no vendor:device to confirm by: rescanned only")
				case classOf(o.dev.Kind) == classMemory:
					rep.add(&o.dev, "found %s online", blockRange(o.found))
				default:
					rep.add(&o.dev, "found %s", strings.Join(o.found, " "))
				}
			}
			return rep, errors.Join(errs...)
		}
		if time.Since(lastScan) >= h.o.Rescan {
			lastScan = time.Now()
			pci, scsi := blind && !rescanned, false
			for _, o := range pending {
				switch classOf(o.dev.Kind) {
				case classPCI:
					pci = true
				case classSCSI:
					scsi = true
				}
			}
			if pci {
				rescanned = true
				if err := h.rescanPCI(&rep); err != nil {
					return rep, errors.Join(append(errs, err)...)
				}
			}
			if scsi {
				if err := h.scanSCSI(&rep); err != nil {
					return rep, errors.Join(append(errs, err)...)
				}
			}
		}
		select {
		case <-ctx.Done():
			for _, o := range pending {
				errs = append(errs, fmt.Errorf("attach %s: %w (%w)", o.dev, o.err, ctx.Err()))
			}
			return rep, errors.Join(errs...)
		case <-time.After(h.o.Poll):
		}
	}
}

// removal is one planned change of a detach.
type removal struct {
	dev  Device
	name string // a PCI address, a disk name or a memory block
	do   func() error
	gone func() bool
}

// Detach drains devs before the fabric detaches them: it checks that the
// host no longer uses them, removes them from the OS and waits until
// they are gone, or ctx ends. have lists the devices attached to this
// host before this step (devs too).
//
// Detach never unmounts, stops a process or downs an interface: draining
// is the workload's business. Every device is checked before anything is
// changed, and any use refuses the whole detach with ErrBusy naming what
// uses it (a mount point, swap, a holder, a process, an interface), with
// nothing changed. Memory blocks are offlined first, since only the
// kernel can tell whether they can be: a block that refuses puts the
// blocks offlined by this call back online and fails with ErrBusy.
//
// Detach is idempotent: a device already gone is reported as such.
func (h *Host) Detach(ctx context.Context, devs, have []Device) (Report, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var rep Report
	by, errs := sortOut(devs)
	if len(errs) > 0 {
		return rep, errors.Join(errs...)
	}
	all := union(have, devs)
	pci, err := h.planPCI(by[classPCI], all, &rep)
	if err != nil {
		return rep, err
	}
	scsi, err := h.planSCSI(by[classSCSI], &rep)
	if err != nil {
		return rep, err
	}
	mem, err := h.planMemory(by[classMemory], all, &rep)
	if err != nil {
		return rep, err
	}
	// Memory first: the kernel's answer to offline is the only busy
	// check that cannot be made beforehand.
	var offlined []removal
	for _, m := range mem {
		if err := m.do(); err != nil {
			for _, back := range offlined {
				if berr := h.onlineBlock(back.name); berr != nil {
					h.log.Warn("memory block stays offline after a refused detach", "block", back.name, "err", berr)
				}
			}
			return rep, fmt.Errorf("detach %s: offline %s: %w: %w", m.dev, m.name, ErrBusy, err)
		}
		offlined = append(offlined, m)
	}
	steps := append(append(offlined, pci...), scsi...)
	for _, s := range steps[len(offlined):] {
		if err := s.do(); err != nil {
			return rep, fmt.Errorf("detach %s: remove %s: %w", s.dev, s.name, err)
		}
	}
	byDev := map[string][]string{}
	var order []Device
	for _, s := range steps {
		if byDev[s.dev.key()] == nil {
			order = append(order, s.dev)
		}
		byDev[s.dev.key()] = append(byDev[s.dev.key()], s.name)
	}
	for _, d := range order {
		switch classOf(d.Kind) {
		case classMemory:
			rep.add(&d, "memory offline %s", blockRange(byDev[d.key()]))
		case classPCI:
			rep.add(&d, "remove %s", strings.Join(byDev[d.key()], " "))
		case classSCSI:
			rep.add(&d, "delete %s", strings.Join(byDev[d.key()], " "))
		}
	}
	for {
		var left []removal
		for _, s := range steps {
			if !s.gone() {
				left = append(left, s)
			}
		}
		if len(left) == 0 {
			for _, d := range order {
				delete(h.claims, d.key())
			}
			return rep, nil
		}
		select {
		case <-ctx.Done():
			for _, s := range left {
				errs = append(errs, fmt.Errorf("detach %s: %s still present: %w (%w)", s.dev, s.name, ErrNotVisible, ctx.Err()))
			}
			return rep, errors.Join(errs...)
		case <-time.After(h.o.Poll):
		}
	}
}

// claimedBy returns the block that claims OS name n, or "".
func (h *Host) claimedBy(n string) string {
	for k, names := range h.claims {
		for _, m := range names {
			if m == n {
				return k
			}
		}
	}
	return ""
}

// blockRange writes memory block names compactly: memory32..39,41.
func blockRange(names []string) string {
	var nums []int
	var other []string
	for _, n := range names {
		if v, err := strconv.Atoi(strings.TrimPrefix(n, "memory")); err == nil && strings.HasPrefix(n, "memory") {
			nums = append(nums, v)
		} else {
			other = append(other, n)
		}
	}
	sort.Ints(nums)
	var parts []string
	for i := 0; i < len(nums); {
		j := i
		for j+1 < len(nums) && nums[j+1] == nums[j]+1 {
			j++
		}
		if j > i {
			parts = append(parts, fmt.Sprintf("%d..%d", nums[i], nums[j]))
		} else {
			parts = append(parts, strconv.Itoa(nums[i]))
		}
		i = j + 1
	}
	s := ""
	if len(parts) > 0 {
		s = "memory" + strings.Join(parts, ",")
	}
	return strings.TrimSpace(s + " " + strings.Join(other, " "))
}
