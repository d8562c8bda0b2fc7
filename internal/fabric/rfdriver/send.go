package rfdriver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"rackpool/internal/rf"
	"strings"
	"time"
)

// outcome is what sending one change did, as far as the driver can tell.
type outcome int

const (
	// applied: the manager said the change is done.
	applied outcome = iota + 1
	// refused: the manager refused it (a 4xx, a task in Exception) and
	// changed nothing, or the answer was unusable; the error says which.
	refused
	// conflict: the resource changed since it was read (412, 409, 404):
	// read again and re-decide.
	conflict
	// unclear: the change may or may not have been applied (lost answer,
	// reset, 5xx, task monitor gone): read the state back.
	unclear
)

// Task polling when the manager gives no Retry-After.
const (
	pollMin = 5 * time.Millisecond
	pollMax = 500 * time.Millisecond
)

// send makes one change and, when the manager answers 202, follows its
// task monitor to the end.
func (d *Driver) send(ctx context.Context, ch *change) (outcome, error) {
	var hdr http.Header
	if ch.etag != "" {
		hdr = http.Header{"If-Match": {ch.etag}}
	}
	r, err := d.c.do(ctx, ch.method, ch.url, ch.body, hdr)
	if err != nil {
		var te *transientError
		if errors.As(err, &te) || ctx.Err() != nil {
			return unclear, err
		}
		return refused, err
	}
	if r.Status == http.StatusAccepted {
		return d.await(ctx, r)
	}
	return judge(r)
}

// judge classifies a change's final answer.
func judge(r *rf.Reply) (outcome, error) {
	switch s := r.Status; {
	case s == http.StatusOK || s == http.StatusCreated || s == http.StatusNoContent:
		return applied, nil
	case s >= 400 && s < 500 && statusError(r).mapped != nil:
		return refused, statusError(r) // a fabric refusal (fabric-emulator says 409 or 400)
	case s == http.StatusPreconditionFailed || s == http.StatusConflict || s == http.StatusNotFound:
		return conflict, statusError(r)
	case s >= 500 || rf.Busy(s):
		return unclear, statusError(r)
	case s >= 400:
		return refused, statusError(r)
	default:
		return refused, fmt.Errorf("%s %s: unexpected status %d", r.Method, r.URL, s)
	}
}

// await polls the task monitor of a 202 answer until the task ends, the
// monitor disappears, or ctx ends. Retry-After is honoured (within ctx).
func (d *Driver) await(ctx context.Context, accepted *rf.Reply) (outcome, error) {
	monitor := accepted.Header.Get("Location")
	if monitor == "" {
		var t struct {
			ID string `json:"@odata.id"`
		}
		if len(accepted.Body) > 0 && accepted.Decode(&t) == nil {
			monitor = t.ID
		}
	}
	if monitor == "" {
		return unclear, fmt.Errorf("%s %s: 202 Accepted without a task monitor", accepted.Method, accepted.URL)
	}
	if _, err := d.c.url(monitor); err != nil {
		return unclear, fmt.Errorf("task monitor of %s %s: %w", accepted.Method, accepted.URL, err)
	}
	// A monitor's Retry-After is obeyed as given, 0 included (the task
	// is done: ask now); without one, polls back off from pollMin.
	wait, given := retryAfterGiven(accepted.Header)
	began := time.Now()
	for n := 1; ; n++ {
		if !given {
			wait = min(pollMin<<min(n-1, 10), pollMax)
		}
		if err := sleep(ctx, wait, nil); err != nil {
			d.cancelTask(ctx, monitor)
			return unclear, fmt.Errorf("task monitor %s of %s %s still running after %s: %w", monitor, accepted.Method, accepted.URL, time.Since(began).Round(time.Millisecond), err)
		}
		wait, given = 0, false // unless a 202 of the monitor says when
		r, err := d.c.do(ctx, http.MethodGet, monitor, nil, nil)
		var te *transientError
		switch {
		case errors.As(err, &te) && ctx.Err() == nil:
			continue
		case err != nil && ctx.Err() != nil:
			d.cancelTask(ctx, monitor)
			return unclear, fmt.Errorf("task monitor %s of %s %s still running after %s: %w", monitor, accepted.Method, accepted.URL, time.Since(began).Round(time.Millisecond), ctx.Err())
		case err != nil:
			d.cancelTask(ctx, monitor)
			return unclear, fmt.Errorf("task monitor of %s %s: %w", accepted.Method, accepted.URL, err)
		}
		switch {
		case r.Status == http.StatusAccepted:
			wait, given = retryAfterGiven(r.Header)
			continue
		case r.Status == http.StatusNotFound || r.Status == http.StatusGone:
			return unclear, fmt.Errorf("task monitor %s of %s %s is gone (%d; the manager may have restarted)", r.URL, accepted.Method, accepted.URL, r.Status)
		case rf.Busy(r.Status):
			wait = retryAfter(r.Header)
			given = wait > 0
			continue
		case r.Status == http.StatusOK:
			if out, done, err := taskResult(r); done {
				return out, err
			}
			wait = retryAfter(r.Header)
			given = wait > 0
			continue
		}
		return judge(r)
	}
}

// taskResult reads a 200 from a task monitor: the operation's own answer
// (done and applied), or a Task resource, done when its TaskState is
// final.
func taskResult(r *rf.Reply) (outcome, bool, error) {
	var t taskRes
	if len(r.Body) == 0 || r.Decode(&t) != nil || !strings.HasPrefix(t.ODataType, "#Task.") || t.TaskState == "" {
		return applied, true, nil
	}
	switch t.TaskState {
	case "Completed":
		if t.TaskStatus == "" || t.TaskStatus == "OK" || t.TaskStatus == "Warning" {
			return applied, true, nil
		}
	case "Exception", "Killed", "Cancelled", "Interrupted":
	default:
		return 0, false, nil // New, Starting, Running, Pending, Stopping, Cancelling, ...
	}
	id, msg := "", "task "+t.TaskState+" ("+t.TaskStatus+")"
	if len(t.Messages) > 0 {
		id, msg = t.Messages[0].MessageID, t.Messages[0].Message
	}
	return refused, true, taskMessageError(r, 0, id, msg)
}

// cancelTask asks the manager to cancel a task the driver stops waiting
// for (best effort: Redfish managers may refuse).
func (d *Driver) cancelTask(ctx context.Context, monitor string) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.c.requestTimeout)
	defer cancel()
	if r, err := d.c.do(cctx, http.MethodDelete, monitor, nil, nil); err != nil {
		d.log.Debug("cancel task", "monitor", monitor, "err", err)
	} else if r.Status >= 300 {
		d.log.Debug("cancel task refused", "monitor", monitor, "status", r.Status)
	}
}
