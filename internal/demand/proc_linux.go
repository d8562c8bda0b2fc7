package demand

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"syscall"
)

var pageSize = int64(os.Getpagesize())

// checkProcfs fails when /proc cannot be read.
func checkProcfs() error {
	if _, err := os.Stat("/proc/self/statm"); err != nil {
		return fmt.Errorf("%w: no procfs: %v", ErrUnsupported, err)
	}
	return nil
}

// procInfo is what /proc/PID/stat says of a process.
type procInfo struct {
	pid, ppid, pgrp int
	state           byte
}

// scanProcs lists every process with its parent and process group.
// Processes that exit during the scan are skipped.
func scanProcs() ([]procInfo, error) {
	d, err := os.Open("/proc")
	if err != nil {
		return nil, err
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	procs := make([]procInfo, 0, len(names))
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil || pid <= 0 {
			continue
		}
		if p, ok := readStat(pid); ok {
			procs = append(procs, p)
		}
	}
	return procs, nil
}

// readStat parses /proc/PID/stat: "pid (comm) state ppid pgrp ...", comm
// possibly holding spaces and parentheses.
func readStat(pid int) (procInfo, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procInfo{}, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procInfo{}, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 3 || len(f[0]) != 1 {
		return procInfo{}, false
	}
	ppid, err1 := strconv.Atoi(string(f[1]))
	pgrp, err2 := strconv.Atoi(string(f[2]))
	if err1 != nil || err2 != nil {
		return procInfo{}, false
	}
	return procInfo{pid: pid, ppid: ppid, pgrp: pgrp, state: f[0][0]}, true
}

// tree returns root's process tree: root, its descendants, and the
// members of its process group when root leads one; and whether root is
// running.
func tree(root int) (pids []int, alive bool, err error) {
	procs, err := scanProcs()
	if err != nil {
		return nil, false, err
	}
	children := map[int][]int{}
	var group []int
	rootLeads := false
	for _, p := range procs {
		children[p.ppid] = append(children[p.ppid], p.pid)
		if p.pid == root {
			alive = p.state != 'Z' && p.state != 'X'
			rootLeads = p.pgrp == root
		}
	}
	if rootLeads {
		for _, p := range procs {
			if p.pgrp == root {
				group = append(group, p.pid)
			}
		}
	}
	seen := map[int]bool{}
	queue := append([]int{root}, group...)
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		if seen[pid] {
			continue
		}
		seen[pid] = true
		pids = append(pids, pid)
		queue = append(queue, children[pid]...)
	}
	return pids, alive, nil
}

// treeUsage measures root's process tree.
func treeUsage(root int) (usage, error) {
	pids, alive, err := tree(root)
	if err != nil || !alive {
		return usage{}, err
	}
	u := usage{alive: true}
	for _, pid := range pids {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/statm")
		if err != nil {
			continue // exited since the scan
		}
		f := bytes.Fields(b)
		if len(f) < 2 {
			continue
		}
		pages, err := strconv.ParseInt(string(f[1]), 10, 64)
		if err != nil {
			continue
		}
		u.rss += pages * pageSize
		u.procs++
	}
	return u, nil
}

// killTree kills root's process tree: it stops every process it finds
// (so that none can fork or exit and leave its children to init) until a
// scan finds no new one, then sends SIGKILL to them all.
func killTree(root int, p *os.Process) {
	stopped := map[int]bool{}
	for range 20 {
		pids, _, err := tree(root)
		if err != nil {
			break
		}
		fresh := false
		for _, pid := range pids {
			if !stopped[pid] {
				_ = syscall.Kill(pid, syscall.SIGSTOP)
				stopped[pid] = true
				fresh = true
			}
		}
		if !fresh {
			break
		}
	}
	for pid := range stopped {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	_ = p.Kill()
}
