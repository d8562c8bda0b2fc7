package fmserver

import (
	"context"
	"errors"
	"net/http"
	"sort"
	"strconv"
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
	tasksPath     = "/redfish/v1/TaskService/Tasks/"
	monitorsPath  = "/redfish/v1/TaskService/TaskMonitors/"
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

// job is one change.
type job struct {
	id      string
	method  string
	target  string
	started time.Time
	steps   int
	doneCh  chan struct{}

	mu       sync.Mutex
	done     int // steps done
	finished bool
	ended    time.Time
	out      outcome
	resp     *rf.Recorder
	apiErr   *apiError
}

type taskTable struct {
	mu    sync.Mutex
	seq   int
	tasks map[string]*job
}

func (t *taskTable) newJob(r *http.Request, steps int, now time.Time) *job {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.seq++
	return &job{id: strconv.Itoa(t.seq), method: r.Method, target: r.URL.Path, started: now, steps: steps, doneCh: make(chan struct{})}
}

// register keeps j as a task, dropping expired and, beyond maxTasks, the
// oldest finished ones.
func (t *taskTable) register(j *job, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var done []*job
	for id, old := range t.tasks {
		old.mu.Lock()
		finished, ended := old.finished, old.ended
		old.mu.Unlock()
		if finished && now.Sub(ended) > taskRetention {
			delete(t.tasks, id)
		} else if finished {
			done = append(done, old)
		}
	}
	if len(t.tasks) >= maxTasks {
		sort.Slice(done, func(a, b int) bool { return done[a].ended.Before(done[b].ended) })
		for _, old := range done[:min(len(done), len(t.tasks)-maxTasks+1)] {
			delete(t.tasks, old.id)
		}
	}
	t.tasks[j.id] = j
}

func (t *taskTable) get(id string, now time.Time) *job {
	t.mu.Lock()
	defer t.mu.Unlock()
	j := t.tasks[id]
	if j == nil {
		return nil
	}
	j.mu.Lock()
	expired := j.finished && now.Sub(j.ended) > taskRetention
	j.mu.Unlock()
	if expired {
		delete(t.tasks, id)
		return nil
	}
	return j
}

// reset forgets every task (a restart).
func (t *taskTable) reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.tasks = map[string]*job{}
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
	j := s.tasks.newJob(r, len(steps), s.clk.Now())
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
				s.log.Error("change failed", "method", j.method, "path", j.target, "err", o.err)
			}
			resp = errorResponse(ae)
		} else {
			resp = finish(ctx)
		}
		j.mu.Lock()
		j.finished, j.ended, j.out, j.resp, j.apiErr = true, s.clk.Now(), o, resp, ae
		j.mu.Unlock()
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
	j.mu.Lock()
	finished, o, resp := j.finished, j.out, j.resp
	j.mu.Unlock()
	if finished && o.took <= s.threshold && (s.threshold > 0 || !o.changed) {
		resp.Replay(w)
		return
	}
	s.tasks.register(j, s.clk.Now())
	w.Header().Set("Location", monitorsPath+j.id)
	retry := "1"
	if j.isFinished() {
		retry = "0"
	}
	w.Header().Set("Retry-After", retry)
	rf.WriteJSON(w, http.StatusAccepted, s.taskBody(j))
}

func (j *job) isFinished() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.finished
}

func (s *Server) taskBody(j *job) map[string]any {
	j.mu.Lock()
	defer j.mu.Unlock()
	body := map[string]any{
		"@odata.id":   tasksPath + j.id,
		"@odata.type": "#Task.v1_7_0.Task",
		"Id":          j.id,
		"Name":        "Task " + j.id,
		"TaskState":   "Running",
		"TaskStatus":  "OK",
		"StartTime":   j.started.UTC().Format(time.RFC3339),
		"TaskMonitor": monitorsPath + j.id,
		"Payload":     map[string]any{"HttpOperation": j.method, "TargetUri": j.target},
		"Messages":    []any{},
	}
	pct := 0
	if j.steps > 0 {
		pct = 100 * j.done / j.steps
	}
	if !j.finished {
		body["PercentComplete"] = min(pct, 99)
		return body
	}
	body["PercentComplete"] = 100
	body["EndTime"] = j.ended.UTC().Format(time.RFC3339)
	if j.apiErr == nil {
		body["TaskState"] = "Completed"
		body["Messages"] = []any{map[string]any{"MessageId": "TaskEvent.1.0.TaskCompletedOK",
			"Message": "The task with Id '" + j.id + "' has completed.", "MessageArgs": []string{j.id}, "MessageSeverity": "OK"}}
		return body
	}
	body["TaskState"] = "Exception"
	body["TaskStatus"] = "Critical"
	msgs := []any{map[string]any{"MessageId": "TaskEvent.1.0.TaskAborted",
		"Message": "The task with Id '" + j.id + "' has been aborted.", "MessageArgs": []string{j.id}, "MessageSeverity": "Critical"}}
	for _, m := range errorBody(j.apiErr)["error"].(map[string]any)["@Message.ExtendedInfo"].([]any) {
		entry := m.(map[string]any)
		delete(entry, "@odata.type")
		msgs = append(msgs, entry)
	}
	body["Messages"] = msgs
	return body
}

func (s *Server) getTaskService(w http.ResponseWriter, r *http.Request) error {
	rf.WriteJSON(w, http.StatusOK, map[string]any{
		"@odata.id":                       "/redfish/v1/TaskService",
		"@odata.type":                     "#TaskService.v1_2_0.TaskService",
		"Id":                              "TaskService",
		"Name":                            "Task Service",
		"ServiceEnabled":                  true,
		"CompletedTaskOverWritePolicy":    "Oldest",
		"LifeCycleEventOnTaskStateChange": false,
		"DateTime":                        s.clk.Now().UTC().Format(time.RFC3339),
		"Status":                          statusOK(""),
		"Tasks":                           ref("/redfish/v1/TaskService/Tasks"),
	})
	return nil
}

func (s *Server) getTasks(w http.ResponseWriter, r *http.Request) error {
	s.tasks.mu.Lock()
	var ids []int
	for id := range s.tasks.tasks {
		n, _ := strconv.Atoi(id)
		ids = append(ids, n)
	}
	s.tasks.mu.Unlock()
	sort.Ints(ids)
	var members []odataID
	for _, id := range ids {
		members = append(members, reff("%s%d", tasksPath, id))
	}
	rf.WriteJSON(w, http.StatusOK, collection("/redfish/v1/TaskService/Tasks", "TaskCollection", "Task Collection", members))
	return nil
}

func (s *Server) getTask(w http.ResponseWriter, r *http.Request) error {
	j := s.tasks.get(r.PathValue("id"), s.clk.Now())
	if j == nil {
		return errNotFound("Task", r.PathValue("id"))
	}
	rf.WriteJSON(w, http.StatusOK, s.taskBody(j))
	return nil
}

func (s *Server) getTaskMonitor(w http.ResponseWriter, r *http.Request) error {
	j := s.tasks.get(r.PathValue("id"), s.clk.Now())
	if j == nil {
		return errNotFound("TaskMonitor", r.PathValue("id"))
	}
	j.mu.Lock()
	finished, resp := j.finished, j.resp
	j.mu.Unlock()
	if !finished {
		w.Header().Set("Location", monitorsPath+j.id)
		w.Header().Set("Retry-After", "1")
		rf.WriteJSON(w, http.StatusAccepted, s.taskBody(j))
		return nil
	}
	resp.Replay(w)
	return nil
}
