package demand

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// DefaultRecordInterval is Record's sampling interval unless told.
const DefaultRecordInterval = 100 * time.Millisecond

// RecordOptions tunes Record. The zero value means the defaults.
type RecordOptions struct {
	// Interval between samples; default DefaultRecordInterval. In seconds
	// it must have at most 6 significant digits (a trace's interval).
	Interval time.Duration
	// Entity names the trace's one series; default the command's base
	// name.
	Entity string
	// MaxSamples stops the recording, killing the command, once reached;
	// default DefaultMaxRows.
	MaxSamples int
	// OnSample, when set, is called with every sample as it is taken,
	// from Record's goroutine.
	OnSample func(Sample)
}

// Sample is one measurement of a process tree.
type Sample struct {
	Elapsed   time.Duration // the sample's time on the grid: index × interval
	RSSBytes  int64         // resident memory summed over the tree
	Processes int           // processes in the tree
	// Interpolated is set on a sample that sampling fell too far behind
	// to take: it is interpolated between its neighbours.
	Interpolated bool
}

// Recording is what Record returns.
type Recording struct {
	// Trace has one series, starting at 0, of the tree's resident memory.
	Trace *Trace
	// State is the command's exit status (nil if it could not be waited
	// for).
	State *os.ProcessState
	// PeakProcesses is the most processes seen in the tree at once.
	PeakProcesses int
	// Interpolated counts the samples sampling fell behind on (see
	// Sample.Interpolated).
	Interpolated int
}

// ErrUnsupported is wrapped by Record's error where the platform cannot
// measure a process tree's memory (anywhere but Linux).
var ErrUnsupported = errors.ErrUnsupported

// Record starts cmd and samples the resident memory (RSS) of its whole
// process tree every interval until cmd exits, and returns the samples as
// a one-series trace with cmd's exit status. A non-zero exit is not an
// error: it is in Recording.State.
//
// The tree is cmd's process and every descendant, found by parent process
// ID at each sample, plus, when cmd leads its own process group
// (SysProcAttr.Setpgid), every member of that group: a daemon that
// double-forks away escapes the tree unless it stays in the group. RSS is
// /proc/PID/statm's resident pages, summed, so pages shared between
// processes of the tree (libraries, shared memory) are counted once per
// process.
//
// The first sample is taken as soon as cmd has started; the next ones on
// a ticker, so that sampling does not drift, and every sample is placed at
// its index × interval. A tick missed because sampling fell behind leaves
// a sample interpolated from its neighbours. Sampling stops when cmd's
// process exits (descendants left running are not waited for); Record
// then returns once cmd.Wait does, so a descendant still holding cmd's
// output pipes keeps it waiting (set cmd.WaitDelay to bound that).
//
// When ctx is done, or MaxSamples is reached, Record kills the tree
// (SIGKILL to every process in it), waits for cmd, and returns the
// recording so far with ctx's error (or one wrapping ErrLimit). An error
// starting cmd is returned with a nil Recording.
func Record(ctx context.Context, cmd *exec.Cmd, o RecordOptions) (*Recording, error) {
	if o.Interval == 0 {
		o.Interval = DefaultRecordInterval
	}
	if o.MaxSamples <= 0 {
		o.MaxSamples = DefaultMaxRows
	}
	if o.Entity == "" {
		o.Entity = filepath.Base(cmd.Path)
	}
	secs := o.Interval.Seconds()
	if o.Interval <= 0 || secs != roundInterval(secs) {
		return nil, fmt.Errorf("record: interval %v: want a positive duration of at most 6 significant digits in seconds", o.Interval)
	}
	if err := checkProcfs(); err != nil {
		return nil, fmt.Errorf("record: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	root := cmd.Process.Pid
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	ticker := time.NewTicker(o.Interval)
	defer ticker.Stop()
	start := time.Now()

	rec := &Recording{Trace: &Trace{Entities: []Series{{Entity: o.Entity}}}}
	s := &rec.Trace.Entities[0]
	last := -1       // index of the last sample taken
	stopped := false // the root has exited: no more samples
	take := func(k int) {
		u, err := treeUsage(root)
		if err != nil || !u.alive {
			stopped = true
			return
		}
		gib := roundGiB(u.rss)
		rec.PeakProcesses = max(rec.PeakProcesses, u.procs)
		if last >= 0 && k > last+1 {
			prev := s.MemoryGiB[last]
			for j := last + 1; j < k; j++ {
				v := roundGiB(int64((prev + (gib-prev)*float64(j-last)/float64(k-last)) * (1 << 30)))
				s.MemoryGiB = append(s.MemoryGiB, v)
				rec.Interpolated++
				if o.OnSample != nil {
					o.OnSample(Sample{Elapsed: time.Duration(j) * o.Interval, RSSBytes: int64(v * (1 << 30)), Interpolated: true})
				}
			}
		}
		s.MemoryGiB = append(s.MemoryGiB, gib)
		last = k
		if o.OnSample != nil {
			o.OnSample(Sample{Elapsed: time.Duration(k) * o.Interval, RSSBytes: u.rss, Processes: u.procs})
		}
	}
	// abort kills the tree and waits for cmd, returning the recording so
	// far and err.
	abort := func(err error) (*Recording, error) {
		killTree(root, cmd.Process)
		<-done
		rec.State = cmd.ProcessState
		return rec.finish(o.Interval), err
	}

	take(0)
	for {
		select {
		case <-done:
			rec.State = cmd.ProcessState
			return rec.finish(o.Interval), nil
		case <-ctx.Done():
			return abort(ctx.Err())
		case now := <-ticker.C:
			if stopped {
				continue
			}
			k := int(math.Round(float64(now.Sub(start)) / float64(o.Interval)))
			if k <= last {
				continue
			}
			if k >= o.MaxSamples {
				// A late tick can jump past the limit: the recording
				// still ends with MaxSamples samples, the last one
				// measured now and the gap before it interpolated.
				if last < o.MaxSamples-1 {
					take(o.MaxSamples - 1)
				}
				return abort(fmt.Errorf("record: %d samples: %w", o.MaxSamples, ErrLimit))
			}
			take(k)
		}
	}
}

// finish sets the trace's interval (0 with fewer than two samples, as a
// file would have it) and returns r.
func (r *Recording) finish(interval time.Duration) *Recording {
	if r.Trace.Entities[0].Len() == 0 {
		// The command exited before the first sample: one sample of 0.
		r.Trace.Entities[0].MemoryGiB = []float64{0}
	}
	if r.Trace.Entities[0].Len() > 1 {
		r.Trace.Interval = interval.Seconds()
	}
	return r
}

// roundGiB converts bytes to GiB rounded to 10^-6 GiB (about 1 KiB), so
// that files stay readable.
func roundGiB(bytes int64) float64 {
	return math.Round(float64(bytes)/(1<<30)*1e6) / 1e6
}

// usage is one measurement of a process tree.
type usage struct {
	rss   int64 // bytes
	procs int
	alive bool // the root is running (not gone, not a zombie)
}
