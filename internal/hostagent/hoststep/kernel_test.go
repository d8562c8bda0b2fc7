package hoststep

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// kernel is a test's stand-in for Linux behind a sysfs tree on tmpfs: a
// goroutine that watches the files the library writes (rescan, scan,
// remove, delete, memory state) and, after delay, adds or removes
// device directories as the kernel would. The library under test is
// exactly what runs on a host.
type kernel struct {
	t                *testing.T
	sys, proc, dev   string
	delay            time.Duration
	rescans, scans   atomic.Int32
	mu               sync.Mutex
	pci              map[string]fakePCI  // on the fabric, by address
	disks            map[string]fakeDisk // on the fabric, by name
	due              map[string]time.Time
	stop, stopped    chan struct{}
	staging          string
	sequence         int
	memoryBlockBytes int64
}

type fakePCI struct {
	vendor, device string
	width          string // current_link_width; "" leaves it out
}

type fakeDisk struct {
	wwid  string
	state string // device/state; default running
	parts []string
}

func newKernel(t *testing.T, delay time.Duration) *kernel {
	t.Helper()
	root := t.TempDir()
	k := &kernel{
		t: t, delay: delay,
		sys: filepath.Join(root, "sys"), proc: filepath.Join(root, "proc"), dev: filepath.Join(root, "dev"),
		staging: filepath.Join(root, "staging"),
		pci:     map[string]fakePCI{}, disks: map[string]fakeDisk{}, due: map[string]time.Time{},
		stop: make(chan struct{}), stopped: make(chan struct{}),
		memoryBlockBytes: 128 << 20,
	}
	for _, d := range []string{"bus/pci/devices", "class/block", "class/net", "class/drm", "class/scsi_host/host0", "class/scsi_host/host2", "devices/system/memory"} {
		k.mkdir(filepath.Join(k.sys, d))
	}
	k.mkdir(k.proc)
	k.mkdir(k.dev)
	k.mkdir(k.staging)
	k.file(filepath.Join(k.sys, "bus/pci/rescan"), "")
	k.file(filepath.Join(k.sys, "class/scsi_host/host0/scan"), "")
	k.file(filepath.Join(k.sys, "class/scsi_host/host2/scan"), "")
	k.file(filepath.Join(k.sys, "devices/system/memory/block_size_bytes"), "8000000\n")
	k.file(filepath.Join(k.proc, "mounts"), "sysfs /sys sysfs rw 0 0\n")
	k.file(filepath.Join(k.proc, "swaps"), "Filename\tType\tSize\tUsed\tPriority\n")
	go k.run()
	t.Cleanup(func() { close(k.stop); <-k.stopped })
	return k
}

func (k *kernel) mkdir(p string) {
	k.t.Helper()
	if err := os.MkdirAll(p, 0o755); err != nil {
		k.t.Fatal(err)
	}
}

func (k *kernel) file(p, content string) {
	k.t.Helper()
	k.mkdir(filepath.Dir(p))
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		k.t.Fatal(err)
	}
}

func (k *kernel) host(t *testing.T) *Host {
	t.Helper()
	h, err := New(Options{SysfsRoot: k.sys, ProcRoot: k.proc, DevRoot: k.dev, Poll: 5 * time.Millisecond, Rescan: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// plugPCI puts a function on the fabric: it appears on the next rescan.
func (k *kernel) plugPCI(bdf string, f fakePCI) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.pci[bdf] = f
}

// presentPCI makes a function that is there already (a local device, or
// one attached before the test).
func (k *kernel) presentPCI(bdf string, f fakePCI) {
	k.plugPCI(bdf, f)
	k.createPCI(bdf, f)
}

func (k *kernel) plugDisk(name string, d fakeDisk) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.disks[name] = d
}

func (k *kernel) presentDisk(name string, d fakeDisk) {
	k.plugDisk(name, d)
	k.createDisk(name, d)
}

// memory adds memory blocks first..last in state.
func (k *kernel) memory(first, last int, state string) {
	for i := first; i <= last; i++ {
		dir := filepath.Join(k.sys, "devices/system/memory", "memory"+itoa(i))
		k.file(filepath.Join(dir, "state"), state+"\n")
		k.file(filepath.Join(dir, "removable"), "1\n")
	}
}

func (k *kernel) memoryState(i int) string {
	b, _ := os.ReadFile(filepath.Join(k.sys, "devices/system/memory", "memory"+itoa(i), "state"))
	if s := strings.TrimSpace(string(b)); !strings.HasPrefix(s, "online_") {
		return s
	}
	return "online" // written as online_movable; a real kernel reads back "online"

}

func itoa(i int) string { return strconv.Itoa(i) }

// install builds dir in staging and renames it into place, so the
// library never sees half a device.
func (k *kernel) install(dst string, build func(dir string)) {
	k.mu.Lock()
	k.sequence++
	tmp := filepath.Join(k.staging, itoa(k.sequence))
	k.mu.Unlock()
	k.mkdir(tmp)
	build(tmp)
	if err := os.Rename(tmp, dst); err != nil {
		k.t.Error(err)
	}
}

func (k *kernel) createPCI(bdf string, f fakePCI) {
	k.install(filepath.Join(k.sys, "bus/pci/devices", bdf), func(dir string) {
		k.file(filepath.Join(dir, "vendor"), f.vendor+"\n")
		k.file(filepath.Join(dir, "device"), f.device+"\n")
		k.file(filepath.Join(dir, "remove"), "")
		if f.width != "" {
			k.file(filepath.Join(dir, "current_link_width"), f.width+"\n")
		}
		k.file(filepath.Join(dir, "aer_dev_fatal"), "Undefined 0\nTOTAL_ERR_FATAL 0\n")
	})
}

func (k *kernel) createDisk(name string, d fakeDisk) {
	k.install(filepath.Join(k.sys, "class/block", name), func(dir string) {
		k.file(filepath.Join(dir, "size"), "3750748848\n")
		k.file(filepath.Join(dir, "dev"), "8:"+itoa(int(name[len(name)-1]-'a')*16)+"\n")
		k.mkdir(filepath.Join(dir, "holders"))
		k.mkdir(filepath.Join(dir, "device/scsi_disk"))
		k.file(filepath.Join(dir, "device/delete"), "")
		k.file(filepath.Join(dir, "device/wwid"), d.wwid+"\n")
		state := d.state
		if state == "" {
			state = "running"
		}
		k.file(filepath.Join(dir, "device/state"), state+"\n")
		for i, p := range d.parts {
			k.file(filepath.Join(dir, p, "partition"), itoa(i+1)+"\n")
			k.file(filepath.Join(dir, p, "dev"), "8:"+itoa(int(name[len(name)-1]-'a')*16+i+1)+"\n")
			k.mkdir(filepath.Join(dir, p, "holders"))
		}
	})
}

// take reads a file the library writes to and empties it; "" when
// nothing was written.
func take(p string) string {
	b, err := os.ReadFile(p)
	if err != nil || len(b) == 0 {
		return ""
	}
	_ = os.WriteFile(p, nil, 0o644)
	return strings.TrimSpace(string(b))
}

func (k *kernel) run() {
	defer close(k.stopped)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-k.stop:
			return
		case <-tick.C:
		}
		now := time.Now()
		k.mu.Lock()
		pci, disks := map[string]fakePCI{}, map[string]fakeDisk{}
		for a, f := range k.pci {
			pci[a] = f
		}
		for n, d := range k.disks {
			disks[n] = d
		}
		k.mu.Unlock()
		if take(filepath.Join(k.sys, "bus/pci/rescan")) == "1" {
			k.rescans.Add(1)
			for a := range pci {
				if !exists(filepath.Join(k.sys, "bus/pci/devices", a)) && k.due["pci "+a].IsZero() {
					k.due["pci "+a] = now.Add(k.delay)
				}
			}
		}
		hosts, _ := os.ReadDir(filepath.Join(k.sys, "class/scsi_host"))
		for _, h := range hosts {
			if take(filepath.Join(k.sys, "class/scsi_host", h.Name(), "scan")) == "- - -" {
				k.scans.Add(1)
				for n := range disks {
					if !exists(filepath.Join(k.sys, "class/block", n)) && k.due["disk "+n].IsZero() {
						k.due["disk "+n] = now.Add(k.delay)
					}
				}
			}
		}
		fns, _ := os.ReadDir(filepath.Join(k.sys, "bus/pci/devices"))
		for _, f := range fns {
			if take(filepath.Join(k.sys, "bus/pci/devices", f.Name(), "remove")) == "1" {
				k.due["rm-pci "+f.Name()] = now.Add(k.delay)
			}
		}
		blocks, _ := os.ReadDir(filepath.Join(k.sys, "class/block"))
		for _, b := range blocks {
			if take(filepath.Join(k.sys, "class/block", b.Name(), "device/delete")) == "1" {
				k.due["rm-disk "+b.Name()] = now.Add(k.delay)
			}
		}
		for what, at := range k.due {
			if now.Before(at) {
				continue
			}
			delete(k.due, what)
			kind, name, _ := strings.Cut(what, " ")
			switch kind {
			case "pci":
				if f, ok := pci[name]; ok {
					k.createPCI(name, f)
				}
			case "disk":
				if d, ok := disks[name]; ok {
					k.createDisk(name, d)
				}
			case "rm-pci":
				_ = os.RemoveAll(filepath.Join(k.sys, "bus/pci/devices", name))
			case "rm-disk":
				_ = os.RemoveAll(filepath.Join(k.sys, "class/block", name))
			}
		}
	}
}
