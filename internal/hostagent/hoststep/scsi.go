package hoststep

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// disk is a SCSI disk (sd) the kernel shows under class/block.
type disk struct {
	name     string // sdb
	wwid     string // device/wwid, as read
	identity string // name, diskseq and wwid: tells a new disk from an old one of the same name
}

// scsiDisks lists the SCSI disks: the whole disks under class/block
// whose device is a SCSI device (device/scsi_disk, or an sd disk with
// device/delete).
func (h *Host) scsiDisks() []disk {
	entries, err := os.ReadDir(h.sys("class", "block"))
	if err != nil {
		return nil
	}
	var out []disk
	for _, e := range entries {
		n := e.Name()
		if h.isPartition(n) {
			continue
		}
		dev := h.sys("class", "block", n, "device")
		if !exists(dev+"/scsi_disk") && !(strings.HasPrefix(n, "sd") && exists(dev+"/delete")) {
			continue
		}
		w, _ := readAttr(dev + "/wwid")
		seq, _ := readAttr(h.sys("class", "block", n, "diskseq"))
		out = append(out, disk{name: n, wwid: w, identity: n + "#" + seq + "#" + w})
	}
	return out
}

// normSerial reduces a WWN or serial to compare: lower case, without
// "naa."/"eui."/"wwn-"/"0x" prefixes and surrounding spaces.
func normSerial(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	for _, p := range []string{"naa.", "eui.", "wwn-", "0x"} {
		s = strings.TrimPrefix(s, p)
	}
	return s
}

// serialMatches reports whether a disk's wwid names serial: equal once
// normalized, or (t10 IDs end with the serial: "t10.ATA     MODEL  SERIAL")
// ending with it after a space.
func serialMatches(wwid, serial string) bool {
	w, s := normSerial(wwid), normSerial(serial)
	if w == "" || s == "" {
		return false
	}
	return w == s || strings.HasSuffix(w, " "+s)
}

// findDisk returns the disk of d: by serial when d has one, else the disk
// this Host claimed for it.
func (h *Host) findDisk(d Device, disks []disk) (disk, bool) {
	for _, k := range disks {
		if d.Serial != "" && serialMatches(k.wwid, d.Serial) {
			return k, true
		}
		if d.Serial == "" && contains(h.claims[d.key()], k.name) {
			return k, true
		}
	}
	return disk{}, false
}

// checkSCSI finds each drive of devs: by its serial (device/wwid) when it
// has one; else a disk that appeared since the Host was made, is not
// claimed by another block and matches no serial of have and devs. The
// disk found is healthy when device/state (when present) reads
// "running" and size is not zero.
func (h *Host) checkSCSI(devs, all []Device) []outcome {
	if len(devs) == 0 {
		return nil
	}
	disks := h.scsiDisks()
	taken := map[string]bool{}
	var outs []outcome
	var blind []Device
	for _, d := range devs {
		k, ok := h.findDisk(d, disks)
		switch {
		case ok:
			taken[k.name] = true
			outs = append(outs, h.diskOutcome(d, k))
		case d.Serial != "":
			outs = append(outs, outcome{dev: d, err: fmt.Errorf("no SCSI disk with wwid %s: %w", d.Serial, ErrNotVisible)})
		default:
			blind = append(blind, d)
		}
	}
	for _, d := range blind {
		var found *disk
		for i, k := range disks {
			if taken[k.name] || h.baseline[k.identity] || h.claimedBy(k.name) != "" || namedBy(k, all) {
				continue
			}
			found = &disks[i]
			break
		}
		if found == nil {
			outs = append(outs, outcome{dev: d, err: fmt.Errorf("no new SCSI disk (the drive has no serial to find it by): %w", ErrNotVisible)})
			continue
		}
		taken[found.name] = true
		// Claimed at once so that the next look finds the same disk.
		h.claims[d.key()] = []string{found.name}
		outs = append(outs, h.diskOutcome(d, *found))
	}
	return outs
}

func namedBy(k disk, all []Device) bool {
	for _, d := range all {
		if d.Serial != "" && serialMatches(k.wwid, d.Serial) {
			return true
		}
	}
	return false
}

func (h *Host) diskOutcome(d Device, k disk) outcome {
	o := outcome{dev: d, found: []string{k.name}}
	if st, err := readAttr(h.sys("class", "block", k.name, "device", "state")); err == nil && st != "running" {
		o.err = fmt.Errorf("%s: SCSI device state %q: %w", k.name, st, ErrUnhealthy)
	} else if sz, err := readAttr(h.sys("class", "block", k.name, "size")); err == nil {
		if n, err := strconv.ParseUint(sz, 10, 64); err == nil && n == 0 {
			o.err = fmt.Errorf("%s: size 0 (no medium or not ready): %w", k.name, ErrUnhealthy)
		}
	}
	return o
}

// scanSCSI asks every SCSI host to scan all channels, targets and LUNs.
func (h *Host) scanSCSI(rep *Report) error {
	hosts, err := os.ReadDir(h.sys("class", "scsi_host"))
	if err != nil {
		return fmt.Errorf("scsi scan: %w", err)
	}
	for _, e := range hosts {
		if err := h.write(h.sys("class", "scsi_host", e.Name(), "scan"), "- - -"); err != nil {
			return fmt.Errorf("scsi scan %s: %w", e.Name(), err)
		}
		rep.add(nil, "scsi-scan %s", e.Name())
	}
	return nil
}

// planSCSI finds the disk of each drive of devs and checks that it is not
// in use. A drive with a serial that no disk has is already gone; one
// without a serial that this Host did not find itself cannot be told
// apart (ErrUnidentified).
func (h *Host) planSCSI(devs []Device, rep *Report) ([]removal, error) {
	if len(devs) == 0 {
		return nil, nil
	}
	disks := h.scsiDisks()
	var out []removal
	for _, d := range devs {
		k, ok := h.findDisk(d, disks)
		if !ok {
			if d.Serial == "" && len(h.claims[d.key()]) == 0 {
				return nil, fmt.Errorf("detach %s: no serial and not attached by this agent: %w", d, ErrUnidentified)
			}
			rep.add(&d, "already gone")
			continue
		}
		if why := h.blockBusy(k.name); why != "" {
			return nil, fmt.Errorf("detach %s: %s: %w", d, why, ErrBusy)
		}
		dir := h.sys("class", "block", k.name)
		out = append(out, removal{
			dev:  d,
			name: k.name,
			do: func() error {
				// The name may come back for another disk: it is not
				// the old one, whatever its identity reads then.
				for id := range h.baseline {
					if strings.HasPrefix(id, k.name+"#") {
						delete(h.baseline, id)
					}
				}
				return h.write(dir+"/device/delete", "1")
			},
			gone: func() bool { return !exists(dir) },
		})
	}
	return out, nil
}
