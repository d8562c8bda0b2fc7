// Package hoststep is the host side of attach and detach: what rackpool
// agent does on a host after the fabric has attached a device to it (make
// the OS see it, confirm it is healthy) and before the fabric detaches one
// (drain it, remove it from the OS). The control plane marks a
// composition Composed only once Attach has succeeded on its host, and
// detaches nothing the host's Detach has refused.
//
// Everything goes through sysfs and procfs under the roots of Options, so
// tests run the same code against a tree they build. Writes to sysfs
// attributes are one open(O_WRONLY|O_TRUNC) and one write(2), as
// `echo value > attribute` does; nothing is shelled out.
//
// # Which devices, how
//
// By kind:
//
//	gpu, fpga, nvme, nic   PCI functions      bus/pci/rescan, bus/pci/devices/*/{vendor,device,remove}
//	ssd, hdd               SCSI disks         class/scsi_host/*/scan, class/block/*/device/{wwid,delete}
//	memory                 memory blocks      devices/system/memory/{block_size_bytes,memoryN/state}
//
// PCI functions are found by counting: with have and devs together
// holding k devices of vendor:device V:D, at least k functions with those
// IDs (compared as lower-case 0x-prefixed hex) must be present. Each
// device is then given, in order, the function this Host gave it before,
// a function that appeared during this attach, or the highest-addressed
// function left. Healthy means current_link_width is not 0 and
// aer_dev_fatal counts no fatal error, where the function has those
// attributes. A PCIe device without vendor and device IDs is rescanned
// for but cannot be confirmed; its step says so and it does not fail.
// Counting assumes the host has no function of the same IDs outside
// have (a local GPU of the pool's model would be counted as a pooled
// one): the agent lists such local devices in have.
//
// SAS/SATA drives are found by their WWN or serial in device/wwid (equal
// once "naa.", "eui.", "0x" and case are stripped, or the end of a t10
// ID). A drive without one is taken to be a disk that appeared after the
// Host was made, not claimed by another block and matching no other
// block's serial; such drives are best given serials, since a Host made
// after the drive appeared (an agent restart) cannot tell it from a local
// disk. Healthy means device/state reads "running" and size is not 0.
//
// Memory is onlined, not found: Bytes / block_size_bytes blocks (rounded
// up) whose state reads "offline" are onlined, lowest first, with
// "online_movable" (so that they can be offlined at detach; "online" when
// the kernel refuses movable). Hosts whose kernel onlines hot-added memory
// itself (auto_online_blocks not "offline") leave no offline block to
// find; set it to "offline" on hosts that take pooled memory.
//
// # Attach
//
// Attach looks first and writes nothing when every device is already
// visible and healthy (retries and repeated agent runs are free). Else it
// rescans the PCI bus and every SCSI host that a missing device needs,
// looks again every Options.Poll and rescans every Options.Rescan, until
// all are ready or ctx ends: then each device not ready is an error
// wrapping ErrNotVisible or ErrUnhealthy (and ctx's error) that says what
// was seen ("1 of 2 PCI functions 0x10de:0x20b0 present", "PCIe link down
// (current_link_width 0)").
//
// # Detach: drain means check, never force
//
// Detach never unmounts, kills, downs an interface or stops swap: whether
// a workload may lose its device is not the agent's to decide. It plans
// every removal first and checks each for use; any use refuses the whole
// detach with ErrBusy naming it, and nothing is changed:
//
//   - a disk or NVMe namespace, or any partition of it, mounted
//     (mountinfo by major:minor and by source, mounts by source, /dev/disk
//     names resolved under DevRoot), used as swap, held by device-mapper
//     or md (holders/), or open by a process (ProcRoot/<pid>/fd);
//   - a network interface of the function administratively up (flags);
//   - a GPU's /dev/dri/cardN, /dev/dri/renderDN or /dev/nvidiaN (the
//     minor from ProcRoot/driver/nvidia/gpus/<bdf>/information) open by a
//     process.
//
// Then memory is offlined (the only use the kernel alone can judge: a
// block whose pages cannot be migrated refuses with EBUSY); a refusal puts
// the blocks this detach offlined back online and fails with ErrBusy.
// Then PCI functions are removed (bus/pci/devices/<bdf>/remove) and disks
// deleted (device/delete), and Detach waits until they are gone (memory:
// state reads "offline").
//
// Which function, disk or blocks a detach removes: the ones this Host
// found or onlined for the device; else, PCI: of the functions of the
// device's IDs, as many stay as have counts beyond devs, and the
// highest-addressed others go; disks: by serial, and a serial-less drive
// this Host did not attach fails with ErrUnidentified; memory: the
// highest-numbered online blocks not marked unremovable. A device already
// gone is reported so, and Detach succeeds.
//
// # Not here
//
// Pooled drives served over NBD (internal/hba, `rackpool drive connect`)
// and memory node leases (internal/memlease) have their own host side: an
// NBD device appears when the drive is connected, not on a rescan, and a
// lease maps memory rather than onlining blocks. They would plug in as
// further classes beside these three (a check that /dev/nbdN is connected,
// a detach that refuses while it is mounted, using the same busy checks).
package hoststep
