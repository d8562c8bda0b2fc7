package hoststep

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

// TestRealSysfsReadOnly runs the parsing against this machine's own /sys
// and /proc. It never writes: the Host's writer fails the test.
func TestRealSysfsReadOnly(t *testing.T) {
	if _, err := os.Stat("/sys/bus/pci/devices"); err != nil {
		t.Skip("no /sys/bus/pci here")
	}
	h, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	h.write = func(p, v string) error {
		t.Errorf("wrote %q to %s on the real host", v, p)
		return os.ErrPermission
	}
	funcs := h.pciFunctions()
	if len(funcs) == 0 {
		t.Skip("no PCI functions visible (a container without a PCI bus)")
	}
	var healthy *pciFunc
	for i, f := range funcs {
		if len(f.vendor) != 6 || len(f.device) != 6 || !strings.HasPrefix(f.vendor, "0x") {
			t.Errorf("%s: IDs %s:%s not normalized", f.bdf, f.vendor, f.device)
		}
		why := h.pciHealth(f.bdf)
		if why == "" && healthy == nil {
			healthy = &funcs[i]
		}
		t.Logf("%s %s health=%q busy=%q", f.bdf, f.vd(), why, h.pciBusy(f.bdf))
	}
	if healthy != nil {
		// Attach of a device that is already there: found, nothing written.
		d := Device{Block: "b-real", Device: "real", Kind: "nic", VendorID: healthy.vendor, DeviceID: strings.ToUpper(healthy.device)}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		rep, err := h.Attach(ctx, []Device{d}, nil)
		if err != nil || len(rep.Steps) != 1 || !strings.HasPrefix(rep.Steps[0].Step, "found ") {
			t.Errorf("attach of present %s: %v %v", healthy.vd(), err, rep.Steps)
		}
	}
	if _, err := os.Stat("/sys/devices/system/memory/block_size_bytes"); err == nil {
		bs, err := h.memoryBlockSize()
		if err != nil || bs&(bs-1) != 0 {
			t.Errorf("block_size_bytes: %d, %v (want a power of two)", bs, err)
		}
		blocks := h.memoryBlocks()
		online := 0
		for _, b := range blocks {
			switch {
			case b.online():
				online++
			case b.state == "offline", b.state == "going-offline":
			default:
				t.Errorf("%s: state %q", b.name, b.state)
			}
		}
		if online == 0 {
			t.Errorf("no online memory block among %d", len(blocks))
		}
		t.Logf("memory: block size %d, %d blocks, %d online", bs, len(blocks), online)
	}
	for _, d := range h.scsiDisks() {
		t.Logf("scsi disk %s wwid %q busy=%q", d.name, d.wwid, h.blockBusy(d.name))
	}
	if b, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
		root := false
		for _, m := range parseMountinfo(b) {
			root = root || m.point == "/"
		}
		if !root {
			t.Error("mountinfo: no mount on /")
		}
	}
}
