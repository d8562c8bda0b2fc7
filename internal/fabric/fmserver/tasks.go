package fmserver

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"rackpool/internal/fabric"
	"rackpool/internal/rf"
)

// taskRoutes are the routes of the TaskService.
var taskRoutes = []route{
	{"GET /redfish/v1/TaskService", login, (*Server).getTaskService},
	{"GET /redfish/v1/TaskService/Tasks", login, (*Server).getTasks},
	{"GET /redfish/v1/TaskService/Tasks/{id}", login, (*Server).getTask},
	{"GET /redfish/v1/TaskService/TaskMonitors/{id}", login, (*Server).getTaskMonitor},
}

// Every change (a zone's POST, PATCH or DELETE, a connection's POST or
// DELETE) runs as a job: its fabric steps in the background under the
// driver's clock. The handler waits for it (see runChange) and answers
// either the final response or 202 Accepted with a task monitor. Jobs
// answered 202 are kept as tasks: their monitor answers 202 while the job
// runs and the final response, on every GET, once it is done, until
// taskRetention after it ended on the server's clock (at most maxTasks
// are kept, the oldest finished ones dropped first). A "restart" forgets
// every task; a job in flight still finishes its change. Task IDs are
// never reused, restart or not.

const (
	taskRetention = 10 * time.Minute
	maxTasks      = 1024
	// maxSyncWait bounds how long a handler waits for a change on a clock
	// that does not sleep in wall time before it answers 202 anyway.
	maxSyncWait = 10 * time.Second
)

// step is one fabric operation of a change.
type step struct {
	detach bool
	a      fabric.Attachment
}

// outcome is what a change's steps did.
type outcome struct {
	took    time.Duration // modelled time, summed over the steps
	changed bool
	err     error
}

// jsonResponse is a recorded answer of v.
func jsonResponse(status int, v any) *rf.Recorder {
	rec := &rf.Recorder{}
	rf.WriteJSON(rec, status, v)
	return rec
}

func errorResponse(e *apiError) *rf.Recorder {
	rec := &rf.Recorder{}
	writeError(rec, e)
	return rec
}

// job is one change, kept as a task when it was answered 202.
type job struct {
	*rf.Task
	steps  int
	doneCh chan struct{} // closed when the change has ended

	mu     sync.Mutex
	done   int       // steps done
	out    outcome   // set before the task ends
	apiErr *apiError // the failure it ended with, if any
}

// apply runs steps in order. When one fails, the steps this call changed
// are undone in reverse order and the failure returned: all or nothing.
func (s *Server) apply(ctx context.Context, steps []step, progress func(done int)) outcome {
	var o outcome
	var did []step
	for i, st := range steps {
		var res fabric.Result
		var err error
		if st.detach {
			res, err = s.drv.Detach(ctx, st.a)
		} else {
			res, err = s.drv.Attach(ctx, st.a)
		}
		if err != nil {
			for k := len(did) - 1; k >= 0; k-- {
				u := did[k]
				var uerr error
				if u.detach {
					_, uerr = s.drv.Attach(ctx, u.a)
				} else {
					_, uerr = s.drv.Detach(ctx, u.a)
				}
				if uerr != nil {
					s.log.Error("undo of a failed change failed", "block", u.a.Block, "host", u.a.Host, "port", u.a.HostPort, "err", uerr)
					err = errors.Join(err, uerr)
				}
			}
			return outcome{took: o.took, err: err}
		}
		o.took += res.Took
		if res.Changed {
			o.changed = true
			did = append(did, st)
		}
		progress(i + 1)
	}
	return o
}

// runChange runs steps as a job and answers r: the final response when
// the change is done within the task threshold, else 202 Accepted with a
// task monitor. unlock (the port's lock) is called when the job ends.
// finish renders the final response of a change that succeeded (with a
// context that outlives the request); a failed one answers its fabric
// error.
//
// On the wall clock the handler waits TaskThreshold for the job. On any
// other clock the job's modelled time passes without wall time, so the
// handler waits for the job (at most maxSyncWait) and then decides: 202
// when the modelled time exceeded the threshold, or, with threshold 0,
// when the change changed something. Either wait ends early when the
// request does (its client went away): the change goes on as a task.
func (s *Server) runChange(w http.ResponseWriter, r *http.Request, unlock func(), steps []step, finish func(ctx context.Context) *rf.Recorder) {
	j := &job{Task: rf.NewTask(s.tasks.NextID(), r, s.clk.Now()), steps: len(steps), doneCh: make(chan struct{})}
	j.Run()
	ctx := context.WithoutCancel(r.Context())
	go func() {
		defer close(j.doneCh)
		defer unlock()
		o := s.apply(ctx, steps, func(done int) {
			j.mu.Lock()
			j.done = done
			j.mu.Unlock()
		})
		var resp *rf.Recorder
		var ae *apiError
		if o.err != nil {
			ae = fabricError(o.err)
			if ae.status >= 500 {
				s.log.Error("change failed", "method", j.Method, "path", j.Target, "err", o.err)
			}
			resp = errorResponse(ae)
		} else {
			resp = finish(ctx)
		}
		j.mu.Lock()
		j.out, j.apiErr = o, ae
		j.mu.Unlock()
		j.End(resp, s.clk.Now())
	}()
	wait := maxSyncWait
	if s.wallClock {
		wait = s.threshold
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-j.doneCh:
	case <-timer.C:
	case <-r.Context().Done(): // the client is gone: the change goes on as a task
	}
	if _, _, resp := j.State(); resp != nil {
		j.mu.Lock()
		o := j.out
		j.mu.Unlock()
		if o.took <= s.threshold && (s.threshold > 0 || !o.changed) {
			resp.Replay(w)
			return
		}
	}
	s.tasks.Add(j, s.clk.Now())
	retry := 1
	if j.Ended() {
		retry = 0
	}
	j.Accept(w, retry, s.taskBody(j))
}

// taskBody is j's Task resource: its progress while it runs, and the
// messages of how it ended (a failure's own messages after TaskAborted).
func (s *Server) taskBody(j *job) map[string]any {
	body := j.Body()
	state, _, _ := j.State()
	j.mu.Lock()
	done, apiErr := j.done, j.apiErr
	j.mu.Unlock()
	switch state {
	case rf.TaskCompleted:
		body["Messages"] = []any{map[string]any{"MessageId": "TaskEvent.1.0.TaskCompletedOK",
			"Message": "The task with Id '" + j.ID + "' has completed.", "MessageArgs": []string{j.ID}, "MessageSeverity": "OK"}}
	case rf.TaskException:
		msgs := []any{map[string]any{"MessageId": "TaskEvent.1.0.TaskAborted",
			"Message": "The task with Id '" + j.ID + "' has been aborted.", "MessageArgs": []string{j.ID}, "MessageSeverity": "Critical"}}
		for _, m := range apiErr.msgs {
			entry := m.Info()
			delete(entry, "@odata.type")
			msgs = append(msgs, entry)
		}
		body["Messages"] = msgs
	default:
		pct := 0
		if j.steps > 0 {
			pct = 100 * done / j.steps
		}
		body["PercentComplete"] = min(pct, 99)
	}
	return body
}

func (s *Server) getTaskService(w http.ResponseWriter, r *http.Request) error {
	rf.WriteJSON(w, http.StatusOK, rf.TaskService(s.clk.Now(), false))
	return nil
}

func (s *Server) getTasks(w http.ResponseWriter, r *http.Request) error {
	rf.WriteJSON(w, http.StatusOK, rf.TaskCollection(s.tasks.IDs(func(*job) bool { return true })))
	return nil
}

func (s *Server) getTask(w http.ResponseWriter, r *http.Request) error {
	j, ok := s.tasks.Get(r.PathValue("id"), s.clk.Now())
	if !ok {
		return errNotFound("Task", r.PathValue("id"))
	}
	rf.WriteJSON(w, http.StatusOK, s.taskBody(j))
	return nil
}

func (s *Server) getTaskMonitor(w http.ResponseWriter, r *http.Request) error {
	j, ok := s.tasks.Get(r.PathValue("id"), s.clk.Now())
	if !ok {
		return errNotFound("TaskMonitor", r.PathValue("id"))
	}
	j.Monitor(w, func() any { return s.taskBody(j) })
	return nil
}
