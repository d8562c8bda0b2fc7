package slurm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"rackpool/api"
)

// Slurm is what the power programs ask of slurmctld.
type Slurm interface {
	// JobFeatures are the features job asks for (its constraint).
	JobFeatures(ctx context.Context, job int64) ([]string, error)
	// Fail marks node down with reason: its jobs are requeued at once
	// rather than after ResumeTimeout.
	Fail(ctx context.Context, node, reason string) error
}

// Scontrol is Slurm through the scontrol command (Path; "scontrol" on
// PATH when empty).
type Scontrol struct{ Path string }

func (s Scontrol) run(ctx context.Context, args ...string) (string, error) {
	p := s.Path
	if p == "" {
		p = "scontrol"
	}
	out, err := exec.CommandContext(ctx, p, args...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("scontrol %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// JobFeatures reads the job's Features from `scontrol show job -o`.
func (s Scontrol) JobFeatures(ctx context.Context, job int64) ([]string, error) {
	out, err := s.run(ctx, "show", "job", "-o", fmt.Sprint(job))
	if err != nil {
		return nil, err
	}
	for _, f := range strings.Fields(out) {
		if v, ok := strings.CutPrefix(f, "Features="); ok {
			return ConstraintFeatures(v), nil
		}
	}
	return nil, nil
}

// Fail sets node DOWN with reason.
func (s Scontrol) Fail(ctx context.Context, node, reason string) error {
	_, err := s.run(ctx, "update", "NodeName="+node, "State=DOWN", "Reason="+reason)
	return err
}

// ResumeFile is SLURM_RESUME_FILE: the jobs a resume is for, and their
// nodes (Slurm 22.05's fields; later releases add more, ignored).
type ResumeFile struct {
	AllNodes string `json:"all_nodes"`
	Jobs     []struct {
		JobID    int64  `json:"job_id"`
		Nodes    string `json:"nodes"`
		Features string `json:"features"` // Slurm 23.02 and later
	} `json:"jobs"`
}

// Power composes and powers nodes on and off for Slurm.
type Power struct {
	Rackpool *api.Client
	Config   *Config
	Slurm    Slurm
	// Timeout bounds a node's power-on (default 5 min).
	Timeout time.Duration
	Logger  *slog.Logger
	// Now is the clock of the keep-warm history (time.Now when nil).
	Now func() time.Time
}

func (p *Power) now() time.Time {
	if p.Now == nil {
		return time.Now()
	}
	return p.Now()
}

func (p *Power) log() *slog.Logger {
	if p.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return p.Logger
}

// NodeFeatures reads which features each node is resumed for: from the
// resume file when there is one (each job's features, on each of its
// nodes), else none for every node of hostlist.
func (p *Power) NodeFeatures(ctx context.Context, hostlist, resumeFile string) (map[string][]string, error) {
	nodes, err := ExpandHostlist(hostlist)
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for _, n := range nodes {
		out[n] = nil
	}
	if resumeFile == "" {
		return out, nil
	}
	data, err := os.ReadFile(resumeFile)
	if err != nil {
		return nil, fmt.Errorf("SLURM_RESUME_FILE: %w", err)
	}
	var rf ResumeFile
	if err := json.Unmarshal(data, &rf); err != nil {
		return nil, fmt.Errorf("SLURM_RESUME_FILE: %w", err)
	}
	for _, j := range rf.Jobs {
		feats := ConstraintFeatures(j.Features)
		if j.Features == "" {
			if feats, err = p.Slurm.JobFeatures(ctx, j.JobID); err != nil {
				return nil, fmt.Errorf("job %d: %w", j.JobID, err)
			}
		}
		jn, err := ExpandHostlist(j.Nodes)
		if err != nil {
			return nil, err
		}
		for _, n := range jn {
			if _, ok := out[n]; !ok {
				continue // a node of the job already up
			}
			for _, f := range feats {
				if !slices.Contains(out[n], f) {
					out[n] = append(out[n], f)
				}
			}
		}
	}
	for n := range out {
		slices.Sort(out[n])
	}
	return out, nil
}

// ResumeHostlist resumes the nodes of hostlist for the features the
// resume file says their jobs want (NodeFeatures, then Resume), or, for a
// node it names none for, those slurmctld passed after the hostlist
// (extra, a constraint). When the features cannot be read every node is
// failed: Slurm requeues the jobs.
func (p *Power) ResumeHostlist(ctx context.Context, hostlist, resumeFile, extra string) error {
	feats, err := p.NodeFeatures(ctx, hostlist, resumeFile)
	if err == nil {
		for n, f := range feats {
			if len(f) == 0 {
				feats[n] = ConstraintFeatures(extra)
			}
		}
		return p.Resume(ctx, feats)
	}
	nodes, herr := ExpandHostlist(hostlist)
	if herr != nil {
		return herr
	}
	errs := []error{err}
	for _, n := range nodes {
		if ferr := p.Slurm.Fail(ctx, n, "rackpool: "+firstLine(err.Error())); ferr != nil {
			errs = append(errs, ferr)
		}
	}
	return errors.Join(errs...)
}

// Resume composes each node's features onto its host and powers it on,
// nodes at once. A node that fails is taken apart again (nothing stays
// composed for it) and marked down with the reason, so Slurm requeues its
// jobs at once; the error names every node that failed.
func (p *Power) Resume(ctx context.Context, features map[string][]string) error {
	p.sweep(ctx, features)
	return p.each(features, func(node string, feats []string) error {
		err := p.resume(ctx, node, feats)
		if err == nil {
			p.remember(node, feats)
			return nil
		}
		reason := "rackpool: " + firstLine(err.Error())
		if cerr := p.takeApart(ctx, node); cerr != nil {
			err = errors.Join(err, fmt.Errorf("take the failed node apart: %w", cerr))
		}
		if ferr := p.Slurm.Fail(ctx, node, reason); ferr != nil {
			err = errors.Join(err, ferr)
		}
		return err
	})
}

func (p *Power) resume(ctx context.Context, node string, feats []string) error {
	start := time.Now()
	req, err := p.Config.Request(node, feats)
	if err != nil {
		return err
	}
	systems, err := p.nodeSystems(ctx, node)
	if err != nil {
		return err
	}
	var sys *api.System
	for i := range systems {
		if systems[i].Name == req.Name && sys == nil {
			sys = &systems[i] // composed for the same features: a resume asked again
			continue
		}
		// Composed for other features (a suspend that did not finish):
		// the node is down, so it is taken apart first.
		if err := p.Rackpool.Decompose(ctx, systems[i].ID); err != nil && !notFound(err) {
			return fmt.Errorf("take apart %s (%s): %w", systems[i].ID, systems[i].Name, err)
		}
	}
	if sys == nil {
		if sys, err = p.Rackpool.Compose(ctx, req); err != nil {
			return fmt.Errorf("compose %s: %w", req.Name, err)
		}
	}
	composed := time.Since(start)
	if err := p.powerOn(ctx, sys.ID); err != nil {
		return fmt.Errorf("power on %s: %w", sys.ID, err)
	}
	p.log().Info("slurm: node resumed", "node", node, "features", strings.Join(feats, ","), "system", sys.ID,
		"compose", composed, "total", time.Since(start))
	return nil
}

// ActiveFeatures are the features node's composed system was composed
// for (none when it has none): what node_features/helpers reports active.
func (p *Power) ActiveFeatures(ctx context.Context, node string) ([]string, error) {
	systems, err := p.nodeSystems(ctx, node)
	if err != nil {
		return nil, err
	}
	for _, s := range systems {
		if _, list, ok := strings.Cut(s.Name, " ["); ok {
			return strings.Fields(strings.TrimSuffix(list, "]")), nil
		}
	}
	return nil, nil
}

// Suspend powers each node off and takes its composition apart, or, with
// KeepWarm, keeps it composed where its features are forecast to be
// wanted again.
func (p *Power) Suspend(ctx context.Context, nodes []string) error {
	m := map[string][]string{}
	for _, n := range nodes {
		m[n] = nil
	}
	p.sweep(ctx, m)
	return p.each(m, func(node string, _ []string) error {
		if kept, err := p.keep(ctx, node); err != nil || kept {
			return err
		}
		if err := p.takeApart(ctx, node); err != nil {
			return err
		}
		p.log().Info("slurm: node suspended", "node", node)
		return nil
	})
}

// ResumeFail powers each node off and takes its composition apart.
func (p *Power) ResumeFail(ctx context.Context, nodes []string) error {
	m := map[string][]string{}
	for _, n := range nodes {
		m[n] = nil
	}
	return p.each(m, func(node string, _ []string) error { return p.takeApart(ctx, node) })
}

// remember records a resume of feats (keep-warm history); node's
// composition is no longer kept warm but in use.
func (p *Power) remember(node string, feats []string) {
	k := p.Config.KeepWarm
	if k == nil {
		return
	}
	now := p.now()
	if err := k.update(now, func(h *history) error {
		key := featureKey(feats)
		h.Resumes[key] = append(h.Resumes[key], now)
		delete(h.Kept, node)
		return nil
	}); err != nil {
		p.log().Warn("slurm: keep-warm history", "err", err)
	}
}

// keep powers node's composition off and keeps it when its features are
// forecast to be resumed again in the next interval; kept says it did.
func (p *Power) keep(ctx context.Context, node string) (kept bool, err error) {
	k := p.Config.KeepWarm
	if k == nil {
		return false, nil
	}
	feats, err := p.ActiveFeatures(ctx, node)
	if err != nil || len(feats) == 0 {
		return false, err
	}
	systems, err := p.nodeSystems(ctx, node)
	if err != nil || len(systems) != 1 {
		return false, err
	}
	now := p.now()
	var want float64
	err = k.update(now, func(h *history) error {
		if want = k.forecast(h, feats, now); want >= k.Threshold {
			h.Kept[node] = now
		}
		return nil
	})
	if err != nil || want < k.Threshold {
		return false, err
	}
	if err := p.reset(ctx, systems[0].ID, "ForceOff"); err != nil && !notFound(err) {
		return false, fmt.Errorf("power off %s: %w", systems[0].ID, err)
	}
	p.log().Info("slurm: node suspended, kept composed", "node", node, "features", strings.Join(feats, ","),
		"forecast", fmt.Sprintf("%.2f resumes in the next %v", want, k.Interval))
	return true, nil
}

// sweep takes apart the compositions kept warm longer than an interval,
// except those of nodes in skip (being resumed or suspended now).
func (p *Power) sweep(ctx context.Context, skip map[string][]string) {
	k := p.Config.KeepWarm
	if k == nil {
		return
	}
	now := p.now()
	var expired []string
	if err := k.update(now, func(h *history) error {
		for node, since := range h.Kept {
			if _, busy := skip[node]; !busy && now.Sub(since) >= k.Interval {
				expired = append(expired, node)
				delete(h.Kept, node)
			}
		}
		return nil
	}); err != nil {
		p.log().Warn("slurm: keep-warm history", "err", err)
		return
	}
	for _, node := range expired {
		if err := p.takeApart(ctx, node); err != nil {
			p.log().Warn("slurm: a composition kept warm could not be taken apart", "node", node, "err", err)
			continue
		}
		p.log().Info("slurm: a composition kept warm was not wanted in time; taken apart", "node", node)
	}
}

// takeApart powers node's systems off and decomposes them.
func (p *Power) takeApart(ctx context.Context, node string) error {
	systems, err := p.nodeSystems(ctx, node)
	if err != nil {
		return err
	}
	var errs []error
	for _, s := range systems {
		if err := p.reset(ctx, s.ID, "ForceOff"); err != nil && !notFound(err) {
			errs = append(errs, fmt.Errorf("power off %s: %w", s.ID, err))
			continue
		}
		if err := p.Rackpool.Decompose(ctx, s.ID); err != nil && !notFound(err) {
			errs = append(errs, fmt.Errorf("take apart %s: %w", s.ID, err))
		}
	}
	return errors.Join(errs...)
}

// each runs f for every node at once and joins the errors, node by node.
func (p *Power) each(nodes map[string][]string, f func(string, []string) error) error {
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for n, feats := range nodes {
		wg.Go(func() {
			if err := f(n, feats); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("node %s: %w", n, err))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return errors.Join(errs...)
}

// nodeSystems are the composed systems named for node.
func (p *Power) nodeSystems(ctx context.Context, node string) ([]api.System, error) {
	all, err := p.Rackpool.Systems(ctx)
	if err != nil {
		return nil, err
	}
	var out []api.System
	for _, s := range all {
		if s.SystemType == "Composed" && nodeOf(s.Name) == node {
			out = append(out, s)
		}
	}
	return out, nil
}

func (p *Power) reset(ctx context.Context, id, typ string) error {
	_, err := p.Rackpool.Do(ctx, "POST", "/redfish/v1/Systems/"+url.PathEscape(id)+"/Actions/ComputerSystem.Reset",
		map[string]any{"ResetType": typ}, nil)
	return err
}

// powerOn resets system id On and waits until it reads On (a reset that
// takes time answers with a task first).
func (p *Power) powerOn(ctx context.Context, id string) error {
	timeout := p.Timeout
	if timeout == 0 {
		timeout = 5 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := p.reset(ctx, id, "On"); err != nil {
		return err
	}
	for wait := 20 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		var s struct{ PowerState string }
		if _, err := p.Rackpool.Do(ctx, "GET", "/redfish/v1/Systems/"+url.PathEscape(id), nil, &s); err != nil {
			return err
		}
		if s.PowerState == "On" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("still %s after %v: %w", s.PowerState, timeout, ctx.Err())
		case <-time.After(wait):
		}
	}
}

func notFound(err error) bool {
	var ae *api.Error
	return errors.As(err, &ae) && ae.Status == http.StatusNotFound
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}
