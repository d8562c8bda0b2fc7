package slurm

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"rackpool/internal/forecast"
)

// KeepWarm is the suspend's choice to keep a node composed (powered off)
// when its features are forecast to be wanted again soon: a resume for the
// same features then only powers it on. Decided from the history of
// resumes the power programs keep in State: resumes of the same features
// (any node) counted per Interval over the last Window, smoothed (EWMA,
// forecast.FitEWMA); kept when the forecast for the next interval is at
// least Threshold. A kept composition not resumed within Interval is
// taken apart by the next power program that runs.
type KeepWarm struct {
	State     string        `yaml:"state"`     // the history file (required)
	Interval  time.Duration `yaml:"interval"`  // default 10m
	Window    time.Duration `yaml:"window"`    // default 24h
	Threshold float64       `yaml:"threshold"` // default 0.5 resumes an interval
}

func (k *KeepWarm) defaults() {
	if k.Interval == 0 {
		k.Interval = 10 * time.Minute
	}
	if k.Window == 0 {
		k.Window = 24 * time.Hour
	}
	if k.Threshold == 0 {
		k.Threshold = 0.5
	}
}

func (k *KeepWarm) validate() error {
	switch {
	case k.State == "":
		return errors.New("keep_warm: state (the history file) is required")
	case k.Interval < 0 || k.Window < 0 || k.Threshold < 0:
		return errors.New("keep_warm: interval, window and threshold must not be negative")
	case k.Window != 0 && k.Interval != 0 && k.Window < 2*k.Interval:
		return errors.New("keep_warm: window must hold at least two intervals")
	}
	return nil
}

// history is the State file: resume times by feature set, and the
// compositions kept warm by node with the time they were kept.
type history struct {
	Resumes map[string][]time.Time `json:"resumes"`
	Kept    map[string]time.Time   `json:"kept"`
}

func featureKey(features []string) string {
	f := slices.Clone(features)
	slices.Sort(f)
	return strings.Join(f, " ")
}

// update runs f on the history under an exclusive lock of the State file
// (power programs run at once), then writes it back, dropping resumes
// older than Window.
func (k *KeepWarm) update(now time.Time, f func(h *history) error) error {
	if err := os.MkdirAll(filepath.Dir(k.State), 0o700); err != nil {
		return err
	}
	lock, err := os.OpenFile(k.State+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return err
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	h := &history{}
	b, err := os.ReadFile(k.State)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return err
	default:
		if err := json.Unmarshal(b, h); err != nil {
			return fmt.Errorf("keep_warm state %s: %w", k.State, err)
		}
	}
	if h.Resumes == nil {
		h.Resumes = map[string][]time.Time{}
	}
	if h.Kept == nil {
		h.Kept = map[string]time.Time{}
	}
	if err := f(h); err != nil {
		return err
	}
	for key, ts := range h.Resumes {
		ts = slices.DeleteFunc(ts, func(t time.Time) bool { return now.Sub(t) > k.Window })
		if len(ts) == 0 {
			delete(h.Resumes, key)
		} else {
			h.Resumes[key] = ts
		}
	}
	out, err := json.Marshal(h)
	if err != nil {
		return err
	}
	tmp := k.State + ".tmp"
	if err := os.WriteFile(tmp, out, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, k.State)
}

// forecast is the expected number of resumes of features in the next
// interval, from their history.
func (k *KeepWarm) forecast(h *history, features []string, now time.Time) float64 {
	n := int(k.Window / k.Interval)
	counts := make([]float64, n)
	for _, t := range h.Resumes[featureKey(features)] {
		age := now.Sub(t)
		if age < 0 || age >= k.Window {
			continue
		}
		counts[n-1-int(age/k.Interval)]++
	}
	m, err := forecast.FitEWMA(counts, 0.3)
	if err != nil {
		return 0
	}
	next := make([]float64, 1)
	m.Forecast(next)
	return next[0]
}
