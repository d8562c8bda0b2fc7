package sim

import (
	"bufio"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"time"

	"rackpool/internal/chart"
	"rackpool/internal/drive"
)

// Dynamic elastic disaggregation of storage (P1 §4) in virtual time:
// n storage servers share nk/3 drives behind a SAS circuit switch; a day
// of load (a diurnal trace) is spread evenly over the drives; every Step
// the live control plane's policy (drive.Elastic.Decide) parks the
// least-loaded server or brings one back, and the drives move as the
// control plane would move them (a parked server's drives to the servers
// with the fewest, an unparked one taking drives from the busiest). The
// run reports what P1 argues for: server-hours saved against keeping
// every server on, throughput per powered server (throughput
// proportionality), and remaps per hour with the drive-offline time they
// cost.

// StorageConfig is one storage run.
type StorageConfig struct {
	Servers         int
	DrivesPerServer int // k: a server's drive slots; the rack has Servers*k/3 drives
	Elastic         drive.Elastic
	Step            time.Duration // policy period (default 10s)
	DriveOnline     time.Duration // per remap (P1 Fig. 2: 1, 10, 90 or 200 ms)
	Trace           []LoadPoint   // load over the day; nil: Diurnal
	Seed            uint64
}

// LoadPoint is the rack's offered load from At on.
type LoadPoint struct {
	At  time.Duration
	Ops float64
}

// StorageSample is one step of a run.
type StorageSample struct {
	At          time.Duration
	OfferedOps  float64
	ServedOps   float64
	Active      int
	Remaps      int
	OfflineSecs float64 // drive-seconds offline from this step's remaps
}

// StorageResult sums a run.
type StorageResult struct {
	Config          StorageConfig `json:"-"`
	Drives          int
	Hours           float64
	ServerHours     float64 // powered (active) servers × hours
	StaticHours     float64 // every server on all day
	SavedFraction   float64
	OfferedOps      float64 // mean
	ServedOps       float64 // mean
	ServedFraction  float64
	OpsPerServer    float64 // served ops per powered server, time-averaged
	StaticPerServer float64 // the same with every server on
	Remaps          int
	RemapsPerHour   float64
	MaxRemapsInHour int
	Decisions       int
	OfflineSecs     float64
	Samples         []StorageSample `json:"-"`
}

// Diurnal returns a day of load between low and peak ops/s: a trough at
// 04:00, a peak at 16:00, with 5% noise every 10 minutes.
func Diurnal(low, peak float64, seed uint64) []LoadPoint {
	rng := rand.New(rand.NewPCG(seed, 7))
	var out []LoadPoint
	for t := time.Duration(0); t < 24*time.Hour; t += 10 * time.Minute {
		phase := 2 * math.Pi * (t.Hours() - 4) / 24
		v := low + (peak-low)*(1-math.Cos(phase))/2
		v *= 1 + 0.05*(rng.Float64()*2-1)
		out = append(out, LoadPoint{At: t, Ops: v})
	}
	return out
}

// ReadLoadTrace reads a CSV of "seconds,ops" rows (a header row is
// skipped), in time order.
func ReadLoadTrace(r io.Reader) ([]LoadPoint, error) {
	cr := csv.NewReader(bufio.NewReader(r))
	cr.FieldsPerRecord = 2
	var out []LoadPoint
	for line := 1; ; line++ {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("load trace: %w", err)
		}
		sec, err1 := strconv.ParseFloat(strings.TrimSpace(rec[0]), 64)
		ops, err2 := strconv.ParseFloat(strings.TrimSpace(rec[1]), 64)
		if err1 != nil || err2 != nil {
			if line == 1 {
				continue // header
			}
			return nil, fmt.Errorf("load trace line %d: want seconds,ops", line)
		}
		if sec < 0 || ops < 0 || math.IsNaN(sec+ops) || math.IsInf(sec+ops, 0) || len(out) > 0 && sec*1e9 <= float64(out[len(out)-1].At) {
			return nil, fmt.Errorf("load trace line %d: times must increase and values be non-negative", line)
		}
		out = append(out, LoadPoint{At: time.Duration(sec * 1e9), Ops: ops})
	}
	if len(out) == 0 {
		return nil, errors.New("load trace is empty")
	}
	return out, nil
}

// RunStorage simulates cfg over its trace.
func RunStorage(cfg StorageConfig) (StorageResult, error) {
	if cfg.Servers < 2 || cfg.DrivesPerServer < 3 {
		return StorageResult{}, errors.New("storage: at least 2 servers with 3 drive slots each")
	}
	if cfg.Step <= 0 {
		cfg.Step = 10 * time.Second
	}
	if cfg.Elastic.Mode == "" {
		cfg.Elastic.Mode = drive.ElasticOn
	}
	e := cfg.Elastic
	if e.NodeOps <= 0 {
		e.NodeOps = 20000
	}
	if cfg.Trace == nil {
		cfg.Trace = Diurnal(0.1*e.NodeOps*float64(cfg.Servers), 0.8*e.NodeOps*float64(cfg.Servers), cfg.Seed)
	}
	end := cfg.Trace[len(cfg.Trace)-1].At + 10*time.Minute
	if len(cfg.Trace) > 1 {
		end = cfg.Trace[len(cfg.Trace)-1].At + (cfg.Trace[len(cfg.Trace)-1].At - cfg.Trace[len(cfg.Trace)-2].At)
	}
	nd := cfg.Servers * cfg.DrivesPerServer / 3
	owner := make([]int, nd) // drive -> server
	for d := range owner {
		owner[d] = d % cfg.Servers
	}
	parked := make([]bool, cfg.Servers)
	rate := make([]float64, cfg.Servers) // EWMA of each server's load
	res := StorageResult{Config: cfg, Drives: nd, Hours: end.Hours(), StaticHours: float64(cfg.Servers) * end.Hours()}
	var last time.Duration = -1
	window := e.Window
	if window <= 0 {
		window = time.Minute
	}
	hold := e.Hold
	if hold <= 0 {
		hold = 5 * time.Minute
	}
	remapsByHour := map[int]int{}
	ti := 0
	var perServerSum, staticPerServerSum float64
	steps := 0
	for t := time.Duration(0); t < end; t += cfg.Step {
		for ti+1 < len(cfg.Trace) && cfg.Trace[ti+1].At <= t {
			ti++
		}
		offered := cfg.Trace[ti].Ops
		perDrive := offered / float64(nd)
		drives := make([]int, cfg.Servers)
		for _, s := range owner {
			drives[s]++
		}
		served, active := 0.0, 0
		alpha := 1 - math.Exp(-cfg.Step.Seconds()/window.Seconds())
		for s := range cfg.Servers {
			load := perDrive * float64(drives[s])
			rate[s] += alpha * (load - rate[s])
			if !parked[s] {
				active++
				served += min(load, e.NodeOps)
			}
		}
		staticServed := 0.0
		for s := range cfg.Servers {
			// Every server on, drives spread evenly.
			share := float64(nd / cfg.Servers)
			if s < nd%cfg.Servers {
				share++
			}
			staticServed += min(perDrive*share, e.NodeOps)
		}
		sample := StorageSample{At: t, OfferedOps: offered, ServedOps: served, Active: active}
		if e.Mode != drive.ElasticOff && (last < 0 || t-last >= hold) {
			nodes := make([]drive.NodeLoad, cfg.Servers)
			for s := range cfg.Servers {
				nodes[s] = drive.NodeLoad{ID: fmt.Sprintf("s%04d", s), Ops: rate[s], Drives: drives[s], Parked: parked[s], Available: true}
			}
			action, id, _ := e.Decide(nodes)
			if action != "" && e.Mode == drive.ElasticDryRun {
				res.Decisions++
				last = t
			} else if action != "" {
				s, _ := strconv.Atoi(strings.TrimPrefix(id, "s"))
				n := storageMove(owner, parked, s, action == "park", cfg.DrivesPerServer)
				if n >= 0 {
					sample.Remaps = n
					res.Decisions++
					last = t
				}
			}
		}
		sample.OfflineSecs = float64(sample.Remaps) * cfg.DriveOnline.Seconds()
		res.Remaps += sample.Remaps
		remapsByHour[int(t.Hours())] += sample.Remaps
		res.OfflineSecs += sample.OfflineSecs
		res.ServerHours += float64(active) * cfg.Step.Hours()
		res.OfferedOps += offered
		res.ServedOps += served
		perServerSum += served / float64(active)
		staticPerServerSum += staticServed / float64(cfg.Servers)
		steps++
		res.Samples = append(res.Samples, sample)
	}
	res.OfferedOps /= float64(steps)
	res.ServedOps /= float64(steps)
	if res.OfferedOps > 0 {
		res.ServedFraction = res.ServedOps / res.OfferedOps
	}
	res.OpsPerServer = perServerSum / float64(steps)
	res.StaticPerServer = staticPerServerSum / float64(steps)
	res.SavedFraction = 1 - res.ServerHours/res.StaticHours
	if math.Abs(res.SavedFraction) < 1e-9 {
		res.SavedFraction = 0 // every server on: rounding, not a loss
	}
	res.RemapsPerHour = float64(res.Remaps) / res.Hours
	for _, n := range remapsByHour {
		res.MaxRemapsInHour = max(res.MaxRemapsInHour, n)
	}
	return res, nil
}

// storageMove parks server s (its drives to the active servers with the
// fewest, up to k each) or unparks it (taking drives from the busiest
// until even), returning the remaps, or -1 if parking is impossible.
func storageMove(owner []int, parked []bool, s int, park bool, k int) int {
	count := make([]int, len(parked))
	for _, o := range owner {
		count[o]++
	}
	if park {
		var mine []int
		for d, o := range owner {
			if o == s {
				mine = append(mine, d)
			}
		}
		room := 0
		for t := range parked {
			if t != s && !parked[t] {
				room += k - count[t]
			}
		}
		if room < len(mine) {
			return -1
		}
		for _, d := range mine {
			best := -1
			for t := range parked {
				if t != s && !parked[t] && count[t] < k && (best < 0 || count[t] < count[best]) {
					best = t
				}
			}
			owner[d] = best
			count[best]++
		}
		parked[s] = true
		return len(mine)
	}
	parked[s] = false
	active := 0
	for t := range parked {
		if !parked[t] {
			active++
		}
	}
	target := min(len(owner)/active, k)
	moved := 0
	for count[s] < target {
		busiest := -1
		for t := range parked {
			if t != s && !parked[t] && (busiest < 0 || count[t] > count[busiest]) {
				busiest = t
			}
		}
		if busiest < 0 || count[busiest] <= count[s]+1 {
			break
		}
		ds := []int{}
		for d, o := range owner {
			if o == busiest {
				ds = append(ds, d)
			}
		}
		sort.Ints(ds)
		d := ds[len(ds)-1]
		owner[d] = s
		count[busiest]--
		count[s]++
		moved++
	}
	return moved
}

// StorageTable renders results as a Markdown table, one row per run.
func StorageTable(names []string, rs []StorageResult) string {
	var b strings.Builder
	b.WriteString("| run | servers | drives | server-hours (static) | saved | served/offered | ops/s per powered server (static) | remaps/h (max in an hour) | decisions | drive-s offline |\n")
	b.WriteString("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for i, r := range rs {
		fmt.Fprintf(&b, "| %s | %d | %d | %.0f (%.0f) | %.0f%% | %.3f | %.0f (%.0f) | %.1f (%d) | %d | %.2f |\n", names[i],
			r.Config.Servers, r.Drives, r.ServerHours, r.StaticHours, 100*r.SavedFraction, r.ServedFraction,
			r.OpsPerServer, r.StaticPerServer, r.RemapsPerHour, r.MaxRemapsInHour, r.Decisions, r.OfflineSecs)
	}
	return b.String()
}

// StorageChart draws a run: powered servers and the offered load in
// servers' worth of capacity, over the day.
func StorageChart(r StorageResult, nodeOps float64) ([]byte, error) {
	var active, load []chart.Point
	for _, s := range r.Samples {
		active = append(active, chart.Point{X: s.At.Hours(), Y: float64(s.Active)})
		load = append(load, chart.Point{X: s.At.Hours(), Y: s.OfferedOps / nodeOps})
	}
	return chart.Line{Title: fmt.Sprintf("Elastic storage servers over a day (%d servers, %d drives)", r.Config.Servers, r.Drives),
		XLabel: "hour", YLabel: "servers", YFromZero: true,
		Series: []chart.Series{{Name: "powered servers", Points: active}, {Name: "offered load, in servers' capacity", Points: load}}}.SVG()
}
