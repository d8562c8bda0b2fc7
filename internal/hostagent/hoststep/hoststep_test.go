package hoststep

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	a100 = fakePCI{vendor: "0x10de", device: "0x20b0", width: "16"}
	gpu5 = Device{Block: "b-gpu5", Device: "gpu5", Kind: "gpu", VendorID: "0x10DE", DeviceID: "20b0"}
	gpu6 = Device{Block: "b-gpu6", Device: "gpu6", Kind: "gpu", VendorID: "0x10de", DeviceID: "0x20b0"}
)

func steps(r Report) string {
	var s []string
	for _, st := range r.Steps {
		s = append(s, st.String())
	}
	return strings.Join(s, "; ")
}

func timeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestAttachPCIWaitsUntilVisible(t *testing.T) {
	k := newKernel(t, 150*time.Millisecond)
	k.plugPCI("0000:83:00.0", a100)
	h := k.host(t)
	start := time.Now()
	rep, err := h.Attach(timeout(t, 5*time.Second), []Device{gpu5}, nil)
	if err != nil {
		t.Fatalf("attach: %v (%s)", err, steps(rep))
	}
	if since := time.Since(start); since < 150*time.Millisecond {
		t.Errorf("attach returned after %v, before the device appeared", since)
	}
	if got, want := steps(rep), "pci-rescan; gpu5 (block b-gpu5): found 0000:83:00.0"; got != want {
		t.Errorf("steps %q, want %q", got, want)
	}
	// Idempotent: a second attach finds it and rescans nothing.
	n := k.rescans.Load()
	rep, err = h.Attach(timeout(t, time.Second), []Device{gpu5}, []Device{gpu5})
	if err != nil || k.rescans.Load() != n || strings.Contains(steps(rep), "rescan") {
		t.Errorf("second attach: %v, %d rescans more, steps %q", err, k.rescans.Load()-n, steps(rep))
	}
}

func TestAttachCountsByVendorDevice(t *testing.T) {
	k := newKernel(t, 50*time.Millisecond)
	k.presentPCI("0000:03:00.0", a100) // gpu5, attached before
	k.plugPCI("0000:84:00.0", a100)    // gpu6, attached by the fabric now
	h := k.host(t)
	rep, err := h.Attach(timeout(t, 5*time.Second), []Device{gpu6}, []Device{gpu5})
	if err != nil {
		t.Fatalf("attach: %v", err)
	}
	if !strings.Contains(steps(rep), "pci-rescan") || !strings.Contains(steps(rep), "gpu6 (block b-gpu6): found 0000:84:00.0") {
		t.Errorf("steps %q: want a rescan, then the new function", steps(rep))
	}
	// Without have, one function of the IDs is enough: nothing to wait for.
	k2 := newKernel(t, 0)
	k2.presentPCI("0000:03:00.0", a100)
	rep, err = k2.host(t).Attach(timeout(t, time.Second), []Device{gpu5}, nil)
	if err != nil || k2.rescans.Load() != 0 {
		t.Errorf("attach of a present function: %v, %d rescans (%s)", err, k2.rescans.Load(), steps(rep))
	}
}

func TestAttachFailures(t *testing.T) {
	tests := []struct {
		name  string
		setup func(k *kernel)
		dev   Device
		want  error
		text  string
	}{
		{"never appears", func(k *kernel) {}, gpu5, ErrNotVisible, "gpu5 (block b-gpu5): 0 of 1 PCI functions 0x10de:0x20b0 present"},
		{"link down", func(k *kernel) { k.plugPCI("0000:83:00.0", fakePCI{vendor: "0x10de", device: "0x20b0", width: "0"}) },
			gpu5, ErrUnhealthy, "0000:83:00.0: PCIe link down"},
		{"disk never appears", func(k *kernel) {}, Device{Block: "b-ssd1", Device: "ssd1", Kind: "ssd", Serial: "5000c500a1b2c3d4"},
			ErrNotVisible, "ssd1 (block b-ssd1): no SCSI disk with wwid 5000c500a1b2c3d4"},
		{"disk offline", func(k *kernel) { k.plugDisk("sdc", fakeDisk{wwid: "naa.5000c500a1b2c3d4", state: "offline"}) },
			Device{Block: "b-ssd1", Device: "ssd1", Kind: "ssd", Serial: "5000c500a1b2c3d4"}, ErrUnhealthy, `sdc: SCSI device state "offline"`},
		{"no offline memory", func(k *kernel) { k.memory(0, 3, "online") }, Device{Block: "b-m", Device: "memnode1", Kind: "memory", Bytes: 1 << 30},
			ErrNotVisible, "0 of 8 offline memory blocks"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := newKernel(t, 10*time.Millisecond)
			tt.setup(k)
			_, err := k.host(t).Attach(timeout(t, 300*time.Millisecond), []Device{tt.dev}, nil)
			if !errors.Is(err, tt.want) || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), tt.text) {
				t.Errorf("err = %v; want %v, the deadline and %q", err, tt.want, tt.text)
			}
		})
	}
}

func TestAttachSCSI(t *testing.T) {
	k := newKernel(t, 50*time.Millisecond)
	k.presentDisk("sda", fakeDisk{wwid: "t10.ATA     LOCALDISK      S1ABC"}) // the boot disk
	h := k.host(t)
	k.plugDisk("sdc", fakeDisk{wwid: "naa.5000c500a1b2c3d4"})
	k.plugDisk("sdd", fakeDisk{wwid: "naa.5000c500ffffffff"})
	ssd1 := Device{Block: "b-ssd1", Device: "ssd1", Kind: "ssd", Serial: "0x5000C500A1B2C3D4"}
	hdd1 := Device{Block: "b-hdd1", Device: "hdd1", Kind: "hdd"} // no serial
	rep, err := h.Attach(timeout(t, 5*time.Second), []Device{ssd1, hdd1}, nil)
	if err != nil {
		t.Fatalf("attach: %v", err)
	}
	want := "scsi-scan host0; scsi-scan host2; ssd1 (block b-ssd1): found sdc; hdd1 (block b-hdd1): found sdd"
	if got := steps(rep); got != want {
		t.Errorf("steps %q, want %q", got, want)
	}
	// The serial-less drive is the one this Host found: detach deletes it.
	rep, err = h.Detach(timeout(t, 5*time.Second), []Device{hdd1}, []Device{ssd1, hdd1})
	if err != nil || exists(filepath.Join(k.sys, "class/block/sdd")) {
		t.Fatalf("detach: %v (%s)", err, steps(rep))
	}
	if got := steps(rep); got != "hdd1 (block b-hdd1): delete sdd" {
		t.Errorf("detach steps %q", got)
	}
	// A fresh Host cannot tell a serial-less drive apart.
	_, err = k.host(t).Detach(timeout(t, time.Second), []Device{hdd1}, nil)
	if !errors.Is(err, ErrUnidentified) {
		t.Errorf("detach by a fresh Host: %v, want ErrUnidentified", err)
	}
}

func TestDetachRefusesBusyDrive(t *testing.T) {
	ssd1 := Device{Block: "b-ssd1", Device: "ssd1", Kind: "ssd", Serial: "naa.5000c500a1b2c3d4"}
	tests := []struct {
		name  string
		setup func(t *testing.T, k *kernel)
		text  string
	}{
		{"mounted", func(t *testing.T, k *kernel) {
			k.file(filepath.Join(k.proc, "mounts"), "sysfs /sys sysfs rw 0 0\n/dev/sdc1 /srv/data\\040set ext4 rw 0 0\n")
		}, "sdc1 is mounted on /srv/data set"},
		{"mounted by uuid", func(t *testing.T, k *kernel) {
			k.file(filepath.Join(k.dev, "sdc2"), "")
			k.mkdir(filepath.Join(k.dev, "disk/by-uuid"))
			if err := os.Symlink("../../sdc2", filepath.Join(k.dev, "disk/by-uuid/1234-abcd")); err != nil {
				t.Fatal(err)
			}
			k.file(filepath.Join(k.proc, "mounts"), "/dev/disk/by-uuid/1234-abcd /scratch xfs rw 0 0\n")
		}, "sdc2 is mounted on /scratch"},
		{"mountinfo by device number", func(t *testing.T, k *kernel) {
			k.file(filepath.Join(k.proc, "self/mountinfo"), "36 25 8:33 / /var/lib/db rw,relatime shared:1 - btrfs /dev/mapper/x rw\n")
		}, "sdc1 is mounted on /var/lib/db"},
		{"swap", func(t *testing.T, k *kernel) {
			k.file(filepath.Join(k.proc, "swaps"), "Filename\tType\tSize\tUsed\tPriority\n/dev/sdc2 partition 1048572 0 -2\n")
		}, "sdc2 is used as swap"},
		{"held by device-mapper", func(t *testing.T, k *kernel) {
			k.mkdir(filepath.Join(k.sys, "class/block/sdc/holders/dm-0"))
		}, "sdc is held by dm-0"},
		{"open by a process", func(t *testing.T, k *kernel) {
			k.file(filepath.Join(k.proc, "4242/comm"), "postgres\n")
			k.mkdir(filepath.Join(k.proc, "4242/fd"))
			if err := os.Symlink("/dev/sdc", filepath.Join(k.proc, "4242/fd/7")); err != nil {
				t.Fatal(err)
			}
		}, "/dev/sdc is open by pid 4242 (postgres)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := newKernel(t, 0)
			k.presentDisk("sdc", fakeDisk{wwid: "naa.5000c500a1b2c3d4", parts: []string{"sdc1", "sdc2"}})
			k.memory(40, 41, "online")
			tt.setup(t, k)
			h := k.host(t)
			var writes []string
			h.write = func(p, v string) error { writes = append(writes, p); return writeAttr(p, v) }
			mem := Device{Block: "b-m", Device: "memnode1", Kind: "memory", Bytes: 256 << 20}
			_, err := h.Detach(timeout(t, time.Second), []Device{mem, ssd1}, []Device{mem, ssd1})
			if !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), tt.text) || !strings.Contains(err.Error(), "ssd1") {
				t.Fatalf("err = %v; want ErrBusy naming ssd1 and %q", err, tt.text)
			}
			if len(writes) > 0 || !exists(filepath.Join(k.sys, "class/block/sdc")) || k.memoryState(40) != "online" {
				t.Errorf("a refused detach changed something: wrote %v", writes)
			}
		})
	}
}

func TestDetachPCI(t *testing.T) {
	k := newKernel(t, 30*time.Millisecond)
	k.presentPCI("0000:03:00.0", a100)
	k.presentPCI("0000:84:00.0", a100)
	h := k.host(t)
	rep, err := h.Detach(timeout(t, 5*time.Second), []Device{gpu6}, []Device{gpu5, gpu6})
	if err != nil {
		t.Fatalf("detach: %v", err)
	}
	if got := steps(rep); got != "gpu6 (block b-gpu6): remove 0000:84:00.0" {
		t.Errorf("steps %q: want the highest address removed", got)
	}
	if exists(filepath.Join(k.sys, "bus/pci/devices/0000:84:00.0")) || !exists(filepath.Join(k.sys, "bus/pci/devices/0000:03:00.0")) {
		t.Error("wrong function removed")
	}
	// Again: already gone, nothing written.
	h.write = func(p, v string) error { t.Errorf("wrote %s", p); return nil }
	rep, err = h.Detach(timeout(t, time.Second), []Device{gpu6}, []Device{gpu5, gpu6})
	if err != nil || !strings.Contains(steps(rep), "already gone") {
		t.Errorf("second detach: %v (%s)", err, steps(rep))
	}
}

func TestDetachPCIBusy(t *testing.T) {
	nvme := Device{Block: "b-nvme1", Device: "nvme1", Kind: "nvme", VendorID: "0x144d", DeviceID: "0xa824"}
	nic := Device{Block: "b-nic1", Device: "nic1", Kind: "nic", VendorID: "0x15b3", DeviceID: "0x101b"}
	tests := []struct {
		name  string
		dev   Device
		setup func(t *testing.T, k *kernel)
		text  string
	}{
		{"nvme namespace mounted", nvme, func(t *testing.T, k *kernel) {
			k.presentPCI("0000:85:00.0", fakePCI{vendor: "0x144d", device: "0xa824", width: "4"})
			ns := filepath.Join(k.sys, "bus/pci/devices/0000:85:00.0/nvme/nvme0/nvme0n1")
			k.file(filepath.Join(ns, "dev"), "259:0\n")
			k.file(filepath.Join(ns, "nvme0n1p1/partition"), "1\n")
			k.file(filepath.Join(ns, "nvme0n1p1/dev"), "259:1\n")
			link(t, ns, filepath.Join(k.sys, "class/block/nvme0n1"))
			link(t, filepath.Join(ns, "nvme0n1p1"), filepath.Join(k.sys, "class/block/nvme0n1p1"))
			k.file(filepath.Join(k.proc, "mounts"), "/dev/nvme0n1p1 /models ext4 rw 0 0\n")
		}, "0000:85:00.0 nvme0n1p1 is mounted on /models"},
		{"gpu open", gpu5, func(t *testing.T, k *kernel) {
			k.presentPCI("0000:83:00.0", a100)
			k.file(filepath.Join(k.proc, "driver/nvidia/gpus/0000:83:00.0/information"), "Model: \t NVIDIA A100\nDevice Minor: \t 2\n")
			k.file(filepath.Join(k.proc, "77/comm"), "python3\n")
			k.mkdir(filepath.Join(k.proc, "77/fd"))
			link(t, "/dev/nvidia2", filepath.Join(k.proc, "77/fd/3"))
		}, "/dev/nvidia2 is open by pid 77 (python3)"},
		{"gpu render node open", gpu5, func(t *testing.T, k *kernel) {
			k.presentPCI("0000:83:00.0", a100)
			k.mkdir(filepath.Join(k.sys, "bus/pci/devices/0000:83:00.0/drm/renderD129"))
			link(t, filepath.Join(k.sys, "bus/pci/devices/0000:83:00.0/drm/renderD129"), filepath.Join(k.sys, "class/drm/renderD129"))
			k.file(filepath.Join(k.proc, "78/comm"), "train\n")
			k.mkdir(filepath.Join(k.proc, "78/fd"))
			link(t, "/dev/dri/renderD129", filepath.Join(k.proc, "78/fd/9"))
		}, "/dev/dri/renderD129 is open by pid 78 (train)"},
		{"nic up", nic, func(t *testing.T, k *kernel) {
			k.presentPCI("0000:86:00.0", fakePCI{vendor: "0x15b3", device: "0x101b"})
			ifdir := filepath.Join(k.sys, "bus/pci/devices/0000:86:00.0/net/ens5f0")
			k.file(filepath.Join(ifdir, "flags"), "0x1003\n")
			link(t, ifdir, filepath.Join(k.sys, "class/net/ens5f0"))
		}, "network interface ens5f0 is up"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := newKernel(t, 0)
			tt.setup(t, k)
			h := k.host(t)
			h.write = func(p, v string) error { t.Errorf("wrote %s", p); return nil }
			_, err := h.Detach(timeout(t, time.Second), []Device{tt.dev}, []Device{tt.dev})
			if !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), tt.text) {
				t.Errorf("err = %v; want ErrBusy and %q", err, tt.text)
			}
		})
	}
}

func link(t *testing.T, target, name string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, name); err != nil {
		t.Fatal(err)
	}
}

func TestMemoryOnlineOffline(t *testing.T) {
	k := newKernel(t, 0)
	k.memory(0, 7, "online")    // local memory
	k.memory(32, 39, "offline") // hot-added by the fabric
	h := k.host(t)
	m1 := Device{Block: "b-m1", Device: "memnode1", Kind: "memory", Bytes: 512 << 20}
	m2 := Device{Block: "b-m2", Device: "memnode1", Kind: "memory", Bytes: 200 << 20} // rounds up to 2 blocks
	rep, err := h.Attach(timeout(t, time.Second), []Device{m1, m2}, nil)
	if err != nil {
		t.Fatalf("attach: %v", err)
	}
	want := "memnode1 (block b-m1): memory online memory32..35; memnode1 (block b-m2): memory online memory36..37; " +
		"memnode1 (block b-m1): found memory32..35 online; memnode1 (block b-m2): found memory36..37 online"
	if got := steps(rep); got != want {
		t.Errorf("steps\n%q, want\n%q", got, want)
	}
	for i := 32; i <= 39; i++ {
		if st, want := k.memoryState(i), map[bool]string{true: "online", false: "offline"}[i <= 37]; st != want {
			t.Errorf("memory%d %s, want %s", i, st, want)
		}
	}
	// Idempotent: nothing more is onlined.
	if rep, err := h.Attach(timeout(t, time.Second), []Device{m1}, []Device{m1, m2}); err != nil || strings.Contains(steps(rep), "memory online") {
		t.Errorf("second attach: %v (%s)", err, steps(rep))
	}
	// Detach offlines the blocks m1 was given, not the highest ones.
	rep, err = h.Detach(timeout(t, time.Second), []Device{m1}, []Device{m1, m2})
	if err != nil || steps(rep) != "memnode1 (block b-m1): memory offline memory32..35" {
		t.Fatalf("detach: %v (%s)", err, steps(rep))
	}
	// A Host that attached nothing offlines the highest online blocks.
	rep, err = k.host(t).Detach(timeout(t, time.Second), []Device{m2}, []Device{m2})
	if err != nil || steps(rep) != "memnode1 (block b-m2): memory offline memory36..37" {
		t.Fatalf("fresh detach: %v (%s)", err, steps(rep))
	}
}

func TestMemoryOfflineRefused(t *testing.T) {
	k := newKernel(t, 0)
	k.memory(0, 3, "online")
	k.memory(32, 35, "online")
	h := k.host(t)
	busy := filepath.Join(k.sys, "devices/system/memory/memory33/state")
	h.write = func(p, v string) error {
		if p == busy && v == "offline" {
			return &os.PathError{Op: "write", Path: p, Err: syscall.EBUSY}
		}
		return writeAttr(p, v)
	}
	m := Device{Block: "b-m1", Device: "memnode1", Kind: "memory", Bytes: 512 << 20}
	_, err := h.Detach(timeout(t, time.Second), []Device{m}, []Device{m})
	if !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), "memory33") {
		t.Fatalf("err = %v; want ErrBusy naming memory33", err)
	}
	deadline := time.Now().Add(time.Second)
	for i := 32; i <= 35; i++ {
		for k.memoryState(i) != "online" && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		if st := k.memoryState(i); st != "online" {
			t.Errorf("memory%d %s after a refused detach, want online", i, st)
		}
	}
}

func TestConcurrentAttachDetach(t *testing.T) {
	k := newKernel(t, 20*time.Millisecond)
	var devs []Device
	for i := 0; i < 6; i++ {
		id := fmt.Sprintf("0x%04x", 0x1000+i)
		k.plugPCI(fmt.Sprintf("0000:%02x:00.0", 0x80+i), fakePCI{vendor: "0x10ee", device: id, width: "8"})
		devs = append(devs, Device{Block: fmt.Sprintf("b-fpga%d", i), Device: fmt.Sprintf("fpga%d", i), Kind: "fpga", VendorID: "0x10ee", DeviceID: id})
	}
	h := k.host(t)
	var wg sync.WaitGroup
	errs := make(chan error, 2*len(devs))
	for _, d := range devs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := h.Attach(timeout(t, 10*time.Second), []Device{d}, nil); err != nil {
				errs <- err
				return
			}
			if _, err := h.Detach(timeout(t, 10*time.Second), []Device{d}, []Device{d}); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestUnsupportedKindAndBlindPCI(t *testing.T) {
	k := newKernel(t, 0)
	h := k.host(t)
	nic := Device{Block: "b-nic9", Device: "nic9", Kind: "nic"} // no IDs
	rep, err := h.Attach(timeout(t, time.Second), []Device{{Block: "b-c", Device: "host1", Kind: "compute"}, nic}, nil)
	if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "host1") {
		t.Errorf("err = %v, want ErrUnsupported naming host1", err)
	}
	if got := steps(rep); got != "pci-rescan; nic9 (block b-nic9): no vendor:device to confirm by: rescanned only" {
		t.Errorf("steps %q", got)
	}
}
