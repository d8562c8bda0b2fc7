package hoststep

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func nodes(l Location) string {
	var s []string
	for _, n := range l.Nodes {
		s = append(s, n.Path)
	}
	return strings.Join(s, " ")
}

// TestLocate: an NVMe drive, a DRM GPU, an NVIDIA GPU and a SCSI disk are
// located with the device nodes a container needs, each under DevRoot; a
// device the host agent already found is located without a rescan; one
// that never shows is an error, not an empty location.
func TestLocate(t *testing.T) {
	k := newKernel(t, 0)
	nvme := fakePCI{vendor: "0x144d", device: "0xa824", width: "4"}
	amd := fakePCI{vendor: "0x1002", device: "0x740f", width: "16"}
	k.presentPCI("0000:05:00.0", nvme)
	k.presentPCI("0000:06:00.0", amd)
	k.presentPCI("0000:83:00.0", a100)
	k.mkdir(filepath.Join(k.sys, "bus/pci/devices/0000:05:00.0/nvme/nvme1/nvme1n1"))
	k.mkdir(filepath.Join(k.sys, "bus/pci/devices/0000:06:00.0/drm/card1"))
	k.mkdir(filepath.Join(k.sys, "bus/pci/devices/0000:06:00.0/drm/renderD129"))
	k.file(filepath.Join(k.proc, "driver/nvidia/gpus/0000:83:00.0/information"), "Model: \t\t NVIDIA A100\nIRQ:   \t\t 42\nDevice Minor: \t 3\n")
	for _, n := range []string{"nvme1", "nvme1n1", "dri/card1", "dri/renderD129", "nvidia3", "nvidiactl", "sdc"} {
		k.file(filepath.Join(k.dev, n), "")
	}
	k.presentDisk("sdc", fakeDisk{wwid: "naa.5000c500a1b2c3d4"})
	drive := Device{Block: "b-nvme", Device: "nvme1", Kind: "nvme", VendorID: "0x144d", DeviceID: "0xa824"}
	mi := Device{Block: "b-mi", Device: "mi210", Kind: "gpu", VendorID: "0x1002", DeviceID: "0x740f"}
	disk := Device{Block: "b-sas", Device: "sas3", Kind: "hdd", Serial: "5000C500A1B2C3D4"}
	h := k.host(t)
	locs, rep, err := h.Locate(timeout(t, 5*time.Second), []Device{drive, mi, gpu5, disk}, nil)
	if err != nil {
		t.Fatalf("locate: %v (%s)", err, steps(rep))
	}
	for key, want := range map[string]string{
		"b-nvme": "0000:05:00.0 | /dev/nvme1 /dev/nvme1n1",
		"b-mi":   "0000:06:00.0 | /dev/dri/card1 /dev/dri/renderD129",
		"b-gpu5": "0000:83:00.0 | /dev/nvidia3 /dev/nvidiactl",
		"b-sas":  "sdc | /dev/sdc",
	} {
		l := locs[key]
		if got := strings.Join(l.Names, " ") + " | " + nodes(l); got != want {
			t.Errorf("%s: %q, want %q", key, got, want)
		}
		for _, n := range l.Nodes {
			if want := filepath.Join(k.dev, strings.TrimPrefix(n.Path, "/dev/")); n.HostPath != want {
				t.Errorf("%s: host path %s, want %s", key, n.HostPath, want)
			}
		}
	}
	if k.rescans.Load() != 0 {
		t.Errorf("%d rescans for devices that were all visible", k.rescans.Load())
	}
	// A device that is not there: the error names it, after the wait.
	gone := Device{Block: "b-gone", Device: "gpu9", Kind: "gpu", VendorID: "0x10de", DeviceID: "0x2330"}
	if _, _, err := h.Locate(timeout(t, 300*time.Millisecond), []Device{gone}, nil); err == nil || !strings.Contains(err.Error(), "gpu9") {
		t.Errorf("locate of an absent device: %v", err)
	}
}
