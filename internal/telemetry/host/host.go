// Package host reads what a host (or one cgroup on it) really uses, for
// rackpool agent: memory in use, its peak and limit, block I/O and GPU
// memory, as the metrics of telemetry.System.
//
// # Where the numbers come from
//
// Memory of a cgroup: cgroup v2 first, the hierarchy mounted with fstype
// cgroup2 (found in /proc/self/mounts), when the cgroup there has the
// memory controller: memory.current (used), memory.peak (kernels from
// 5.19), memory.max (limit, unless "max"). Otherwise cgroup v1's memory
// hierarchy (fstype cgroup with the memory option): memory.usage_in_bytes,
// memory.max_usage_in_bytes, memory.limit_in_bytes (no limit when it is
// the kernel's "unlimited", 2^63 rounded down to a page). Hosts that mount
// both, with v2 lacking the memory controller (the hybrid layout of
// systemd), read v1.
//
// Memory of the whole machine (no cgroup named): /proc/meminfo, used =
// MemTotal − MemAvailable, limit = MemTotal, no peak.
//
// Block I/O: a cgroup's io.stat (v2: rbytes, wbytes summed over devices)
// or blkio.throttle.io_service_bytes (v1: Read, Write), else, and for the
// whole machine, /proc/diskstats: sectors read and written × 512, summed
// over the disks in /sys/block that are not loop, ram, zram, device-mapper
// or md devices (those count the I/O of the disks under them again).
// Counters become rates per second between two reads; the first read, and
// a counter that went backwards, give none.
//
// GPUs: `nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits`
// when nvidia-smi is on PATH, summed over the GPUs (MiB × 2^20); without
// it, or when it fails, no GPU metric is reported.
package host

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"rackpool/internal/telemetry"
)

// Options configure a Reader.
type Options struct {
	// Root is the file system root the /proc and /sys paths are read
	// under; "" means "/" (tests point it at testdata).
	Root string
	// Cgroup is the cgroup to read, relative to its hierarchy's mount
	// ("/" is the hierarchy's root); "" reads the whole machine.
	Cgroup string
	// NvidiaSMI is the nvidia-smi command; "" looks it up on PATH, "-"
	// never reads GPUs.
	NvidiaSMI string
}

// Mode says where memory is read from.
type Mode string

// Modes.
const (
	CgroupV2 Mode = "cgroup2"
	CgroupV1 Mode = "cgroup1"
	Machine  Mode = "meminfo"
)

// Reader reads one host or cgroup. It is not safe for concurrent use.
type Reader struct {
	o    Options
	mode Mode
	dir  string // the cgroup's directory (memory hierarchy), or ""
	io   string // the cgroup's I/O file, or "" for /proc/diskstats
	gpu  string // nvidia-smi path, or ""

	last     counters
	lastAt   time.Time
	haveLast bool
}

type counters struct {
	read, written uint64
}

// New finds what to read: the cgroup's hierarchy (v2 with the memory
// controller, else v1) or the whole machine. It fails when a cgroup is
// named and neither hierarchy has it.
func New(o Options) (*Reader, error) {
	if o.Root == "" {
		o.Root = "/"
	}
	r := &Reader{o: o, mode: Machine}
	switch o.NvidiaSMI {
	case "-":
	case "":
		if p, err := exec.LookPath("nvidia-smi"); err == nil {
			r.gpu = p
		}
	default:
		r.gpu = o.NvidiaSMI
	}
	if o.Cgroup == "" {
		return r, nil
	}
	rel := strings.Trim(o.Cgroup, "/")
	if strings.Contains("/"+rel+"/", "/../") {
		return nil, fmt.Errorf("cgroup %q: .. is not allowed in a path inside the hierarchy", o.Cgroup)
	}
	mounts, err := os.ReadFile(r.path("proc/self/mounts"))
	if err != nil {
		return nil, fmt.Errorf("find the cgroup hierarchies: %w", err)
	}
	v2, v1mem, v1blkio := parseMounts(mounts)
	var tried []string
	if v2 != "" {
		dir := filepath.Join(r.path(v2), rel)
		if exists(filepath.Join(dir, "memory.current")) {
			r.mode, r.dir = CgroupV2, dir
			if exists(filepath.Join(dir, "io.stat")) {
				r.io = filepath.Join(dir, "io.stat")
			}
			return r, nil
		}
		tried = append(tried, "cgroup2 at "+v2+" (no memory.current there: no such cgroup, or no memory controller)")
	}
	if v1mem != "" {
		dir := filepath.Join(r.path(v1mem), rel)
		if exists(filepath.Join(dir, "memory.usage_in_bytes")) {
			r.mode, r.dir = CgroupV1, dir
			if v1blkio != "" {
				if f := filepath.Join(r.path(v1blkio), rel, "blkio.throttle.io_service_bytes"); exists(f) {
					r.io = f
				}
			}
			return r, nil
		}
		tried = append(tried, "cgroup v1 memory at "+v1mem)
	}
	if len(tried) == 0 {
		return nil, fmt.Errorf("cgroup %q: no cgroup2 or cgroup v1 memory hierarchy is mounted", o.Cgroup)
	}
	return nil, fmt.Errorf("cgroup %q not found: tried %s", o.Cgroup, strings.Join(tried, "; "))
}

// Mode says where memory is read from.
func (r *Reader) Mode() Mode { return r.mode }

// Dir is the cgroup's directory ("" for the whole machine).
func (r *Reader) Dir() string { return r.dir }

// GPUs reports whether GPU memory is read.
func (r *Reader) GPUs() bool { return r.gpu != "" }

func (r *Reader) path(p string) string { return filepath.Join(r.o.Root, strings.TrimPrefix(p, "/")) }

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// Read returns the metrics of telemetry.System that can be read now, by
// name. Rates need two reads: the first has none. A failure to read
// memory is an error; I/O and GPU failures leave their metrics out.
func (r *Reader) Read(ctx context.Context, now time.Time) (map[string]float64, error) {
	out := map[string]float64{}
	if err := r.readMemory(out); err != nil {
		return nil, err
	}
	if c, err := r.readIO(); err == nil {
		if r.haveLast && now.After(r.lastAt) && c.read >= r.last.read && c.written >= r.last.written {
			secs := now.Sub(r.lastAt).Seconds()
			out[telemetry.IORead] = float64(c.read-r.last.read) / secs
			out[telemetry.IOWrite] = float64(c.written-r.last.written) / secs
		}
		r.last, r.lastAt, r.haveLast = c, now, true
	}
	if r.gpu != "" {
		if used, ok := r.readGPU(ctx); ok {
			out[telemetry.GPUMemoryUsed] = float64(used)
		}
	}
	return out, nil
}

func (r *Reader) readMemory(out map[string]float64) error {
	switch r.mode {
	case CgroupV2:
		used, err := readValue(filepath.Join(r.dir, "memory.current"))
		if err != nil {
			return err
		}
		out[telemetry.MemoryUsed] = float64(used)
		if peak, err := readValue(filepath.Join(r.dir, "memory.peak")); err == nil {
			out[telemetry.MemoryPeak] = float64(peak)
		}
		if limit, err := readValue(filepath.Join(r.dir, "memory.max")); err == nil {
			out[telemetry.MemoryLimit] = float64(limit)
		}
	case CgroupV1:
		used, err := readValue(filepath.Join(r.dir, "memory.usage_in_bytes"))
		if err != nil {
			return err
		}
		out[telemetry.MemoryUsed] = float64(used)
		if peak, err := readValue(filepath.Join(r.dir, "memory.max_usage_in_bytes")); err == nil {
			out[telemetry.MemoryPeak] = float64(peak)
		}
		if limit, err := readValue(filepath.Join(r.dir, "memory.limit_in_bytes")); err == nil {
			out[telemetry.MemoryLimit] = float64(limit)
		}
	default:
		data, err := os.ReadFile(r.path("proc/meminfo"))
		if err != nil {
			return err
		}
		total, avail, err := parseMeminfo(data)
		if err != nil {
			return err
		}
		out[telemetry.MemoryUsed] = float64(total - avail)
		out[telemetry.MemoryLimit] = float64(total)
	}
	return nil
}

// errNoLimit is readValue's answer to "max" and v1's unlimited.
var errNoLimit = errors.New("no limit")

// v1Unlimited: v1 reports no limit as 2^63-1 rounded down to a page;
// anything this large is no limit.
const v1Unlimited = 1 << 62

// readValue reads a cgroup file holding one number, or "max".
func readValue(file string) (uint64, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return 0, err
	}
	return parseValue(data)
}

func parseValue(data []byte) (uint64, error) {
	s := strings.TrimSpace(string(data))
	if s == "max" {
		return 0, errNoLimit
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("not a number: %q", s)
	}
	if v >= v1Unlimited {
		return 0, errNoLimit
	}
	return v, nil
}

// parseMeminfo returns MemTotal and MemAvailable in bytes.
func parseMeminfo(data []byte) (total, avail uint64, err error) {
	var haveTotal, haveAvail bool
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		v, perr := strconv.ParseUint(f[1], 10, 64)
		if perr != nil || v > math.MaxUint64/1024 {
			continue
		}
		if len(f) == 3 && f[2] == "kB" {
			v *= 1024
		}
		switch f[0] {
		case "MemTotal:":
			total, haveTotal = v, true
		case "MemAvailable:":
			avail, haveAvail = v, true
		}
	}
	if !haveTotal || !haveAvail || avail > total {
		return 0, 0, errors.New("/proc/meminfo has no usable MemTotal and MemAvailable")
	}
	return total, avail, nil
}

// parseMounts finds the cgroup2 mount point and the cgroup v1 mount
// points of the memory and blkio controllers.
func parseMounts(data []byte) (v2, v1mem, v1blkio string) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 {
			continue
		}
		switch f[2] {
		case "cgroup2":
			if v2 == "" {
				v2 = unescapeMount(f[1])
			}
		case "cgroup":
			for _, opt := range strings.Split(f[3], ",") {
				switch {
				case opt == "memory" && v1mem == "":
					v1mem = unescapeMount(f[1])
				case opt == "blkio" && v1blkio == "":
					v1blkio = unescapeMount(f[1])
				}
			}
		}
	}
	return v2, v1mem, v1blkio
}

// unescapeMount undoes the octal escapes of /proc/self/mounts (\040 for
// a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func (r *Reader) readIO() (counters, error) {
	if r.io != "" {
		data, err := os.ReadFile(r.io)
		if err != nil {
			return counters{}, err
		}
		if r.mode == CgroupV2 {
			return parseIOStat(data), nil
		}
		return parseBlkio(data), nil
	}
	data, err := os.ReadFile(r.path("proc/diskstats"))
	if err != nil {
		return counters{}, err
	}
	return parseDiskstats(data, func(name string) bool { return exists(r.path("sys/block/" + name)) }), nil
}

// parseIOStat sums rbytes and wbytes over the devices of a v2 io.stat.
func parseIOStat(data []byte) counters {
	var c counters
	for _, line := range strings.Split(string(data), "\n") {
		for _, kv := range strings.Fields(line) {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				continue
			}
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				continue
			}
			switch k {
			case "rbytes":
				c.read += n
			case "wbytes":
				c.written += n
			}
		}
	}
	return c
}

// parseBlkio sums Read and Write over the devices of a v1
// blkio.throttle.io_service_bytes.
func parseBlkio(data []byte) counters {
	var c counters
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			continue
		}
		n, err := strconv.ParseUint(f[2], 10, 64)
		if err != nil {
			continue
		}
		switch f[1] {
		case "Read":
			c.read += n
		case "Write":
			c.written += n
		}
	}
	return c
}

// layered are the block devices whose I/O is that of other disks again.
var layered = []string{"loop", "ram", "zram", "dm-", "md"}

// parseDiskstats sums sectors read and written (× 512) over the devices
// isDisk accepts (whole disks: partitions count their disk's I/O again)
// that are not layered.
func parseDiskstats(data []byte, isDisk func(string) bool) counters {
	var c counters
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 10 {
			continue
		}
		name := f[2]
		skip := false
		for _, p := range layered {
			skip = skip || strings.HasPrefix(name, p)
		}
		if skip || !isDisk(name) {
			continue
		}
		rd, err1 := strconv.ParseUint(f[5], 10, 64)
		wr, err2 := strconv.ParseUint(f[9], 10, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		c.read += rd * 512
		c.written += wr * 512
	}
	return c
}

func (r *Reader) readGPU(ctx context.Context) (uint64, bool) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, r.gpu, "--query-gpu=memory.used", "--format=csv,noheader,nounits").Output()
	if err != nil {
		return 0, false
	}
	return parseNvidiaSMI(out)
}

// parseNvidiaSMI sums the MiB of each line into bytes; false when no line
// is a number.
func parseNvidiaSMI(out []byte) (uint64, bool) {
	var sum uint64
	n := 0
	for _, line := range strings.Split(string(out), "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		v, err := strconv.ParseFloat(line, 64)
		if err != nil || v < 0 || math.IsInf(v, 0) {
			return 0, false
		}
		sum += uint64(v * (1 << 20))
		n++
	}
	return sum, n > 0
}
