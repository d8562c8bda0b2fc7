package hoststep

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"
)

// memBlock is one memory block under devices/system/memory.
type memBlock struct {
	name      string // memory32
	num       int
	state     string // online, offline, going-offline
	removable string // "1", "0" or "" (attribute absent)
}

func (b memBlock) online() bool { return strings.HasPrefix(b.state, "online") }

// memoryBlockSize reads block_size_bytes (hexadecimal).
func (h *Host) memoryBlockSize() (uint64, error) {
	s, err := readAttr(h.sys("devices", "system", "memory", "block_size_bytes"))
	if err != nil {
		return 0, err
	}
	v, err := parseHex(s)
	if err != nil || v == 0 {
		return 0, fmt.Errorf("block_size_bytes %q: not a block size", s)
	}
	return v, nil
}

// memoryBlocks lists the memory blocks, lowest first.
func (h *Host) memoryBlocks() []memBlock {
	entries, err := os.ReadDir(h.sys("devices", "system", "memory"))
	if err != nil {
		return nil
	}
	var out []memBlock
	for _, e := range entries {
		n, ok := strings.CutPrefix(e.Name(), "memory")
		num, err := strconv.Atoi(n)
		if !ok || err != nil {
			continue
		}
		st, err := readAttr(h.sys("devices", "system", "memory", e.Name(), "state"))
		if err != nil {
			continue
		}
		rm, _ := readAttr(h.sys("devices", "system", "memory", e.Name(), "removable"))
		out = append(out, memBlock{name: e.Name(), num: num, state: st, removable: rm})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].num < out[j].num })
	return out
}

// blocksFor is how many memory blocks d's bytes fill (rounded up).
func (h *Host) blocksFor(d Device) (int, error) {
	if d.Bytes <= 0 {
		return 0, nil
	}
	bs, err := h.memoryBlockSize()
	if err != nil {
		return 0, err
	}
	return int((uint64(d.Bytes) + bs - 1) / bs), nil
}

// onlineMemory onlines, for each memory device, as many offline blocks
// as its bytes fill, lowest first, as online_movable (so that they can be
// offlined again; "online" when the kernel refuses movable). The blocks
// are claimed for the device as they are onlined, so a retry goes on
// where this one stopped. A block that will not online is not tried
// again in this attach (failed).
func (h *Host) onlineMemory(devs []Device, rep *Report, failed map[string]error) []outcome {
	if len(devs) == 0 {
		return nil
	}
	var outs []outcome
	for _, d := range devs {
		n, err := h.blocksFor(d)
		if err != nil {
			outs = append(outs, outcome{dev: d, err: fmt.Errorf("memory block size: %v: %w", err, ErrNotVisible)})
			continue
		}
		blocks := h.memoryBlocks()
		byName := map[string]memBlock{}
		for _, b := range blocks {
			byName[b.name] = b
		}
		var mine, did []string
		for _, c := range h.claims[d.key()] {
			b, ok := byName[c]
			if !ok {
				continue
			}
			if !b.online() {
				if err := h.onlineBlock(c); err != nil {
					failed[c] = err
					continue
				}
				did = append(did, c)
			}
			mine = append(mine, c)
		}
		for _, b := range blocks {
			if len(mine) >= n {
				break
			}
			if b.online() || failed[b.name] != nil || h.claimedBy(b.name) != "" {
				continue
			}
			if err := h.onlineBlock(b.name); err != nil {
				failed[b.name] = err
				continue
			}
			mine = append(mine, b.name)
			did = append(did, b.name)
			h.claims[d.key()] = append([]string(nil), mine...)
		}
		h.claims[d.key()] = mine
		if len(did) > 0 {
			rep.add(&d, "memory online %s", blockRange(did))
		}
		o := outcome{dev: d, found: mine}
		if len(mine) < n {
			o.err = fmt.Errorf("%d of %d offline memory blocks found to online: %w", len(mine), n, ErrNotVisible)
			for name, ferr := range failed {
				o.err = fmt.Errorf("%d of %d memory blocks online; %s would not online: %v: %w", len(mine), n, name, ferr, ErrUnhealthy)
				break
			}
		}
		outs = append(outs, o)
	}
	return outs
}

// onlineBlock onlines one memory block, movable when the kernel allows.
func (h *Host) onlineBlock(name string) error {
	state := h.sys("devices", "system", "memory", name, "state")
	err := h.write(state, "online_movable")
	if err == nil {
		return nil
	}
	if err2 := h.write(state, "online"); err2 != nil {
		return errors.Join(err, err2)
	}
	return nil
}

// planMemory chooses the blocks to offline for each memory device: as
// many as its bytes fill, the blocks it claimed first, then the
// highest-numbered online blocks that are removable (or say nothing) and
// not claimed by a device that stays. Fewer found means fewer offlined
// (the rest is already offline).
func (h *Host) planMemory(devs, all []Device, rep *Report) ([]removal, error) {
	if len(devs) == 0 {
		return nil, nil
	}
	leaving := map[string]bool{}
	for _, d := range devs {
		leaving[d.key()] = true
	}
	blocks := h.memoryBlocks()
	chosen := map[string]bool{}
	var out []removal
	for _, d := range devs {
		n, err := h.blocksFor(d)
		if err != nil {
			return nil, fmt.Errorf("detach %s: memory block size: %w", d, err)
		}
		var mine []memBlock
		for i := len(blocks) - 1; i >= 0; i-- {
			if b := blocks[i]; b.online() && contains(h.claims[d.key()], b.name) && len(mine) < n {
				mine, chosen[b.name] = append(mine, b), true
			}
		}
		for i := len(blocks) - 1; i >= 0 && len(mine) < n; i-- {
			b := blocks[i]
			owner := h.claimedBy(b.name)
			if chosen[b.name] || !b.online() || b.removable == "0" || (owner != "" && owner != d.key() && !leaving[owner]) {
				continue
			}
			mine, chosen[b.name] = append(mine, b), true
		}
		if len(mine) < n {
			rep.add(&d, "%d of %d memory blocks online to offline; the rest is taken to be offline already", len(mine), n)
		}
		for _, b := range mine {
			state := h.sys("devices", "system", "memory", b.name, "state")
			out = append(out, removal{
				dev:  d,
				name: b.name,
				do: func() error {
					err := h.write(state, "offline")
					if errors.Is(err, syscall.EBUSY) || errors.Is(err, syscall.EAGAIN) {
						return fmt.Errorf("the kernel cannot migrate its pages now: %w", err)
					}
					return err
				},
				gone: func() bool {
					s, err := readAttr(state)
					return err != nil || s == "offline"
				},
			})
		}
	}
	return out, nil
}
