package redfish

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"rackpool/internal/rf"
	"rackpool/internal/tenancy"

	"rackpool/internal/events"
)

// taskRoutes are the routes of the TaskService (routes.go).
var taskRoutes = []route{
	{"GET /redfish/v1/TaskService", login, (*Server).getTaskService},
	{"GET /redfish/v1/TaskService/Tasks", login, (*Server).getTasks},
	{"GET /redfish/v1/TaskService/Tasks/{id}", login, (*Server).getTask},
	{"DELETE /redfish/v1/TaskService/Tasks/{id}", configureComponents, (*Server).deleteTask},
	{"GET /redfish/v1/TaskService/TaskMonitors/{id}", login, (*Server).getTaskMonitor},
}

// TaskService: work whose modelled fabric time exceeds the async
// threshold (Options.AsyncThreshold), or whose client sends
// "Prefer: respond-async", answers 202 Accepted with a task monitor in
// Location. GET on the monitor answers 202 while the task runs and, once
// it is done, the response the request would have had (201 with the new
// system, or the error). The Task resource shows state, progress and
// messages. Tasks live in memory: a restart forgets them, while the
// composition workflows they ran are recovered by the composition manager
// like any other. Finished tasks are kept for taskRetention.

const (
	tasksPath     = "/redfish/v1/TaskService/Tasks/"
	monitorsPath  = "/redfish/v1/TaskService/TaskMonitors/"
	taskRetention = time.Hour
	maxTasks      = 1000
)

type task struct {
	id        string
	owner     tenancy.Principal
	method    string
	target    string
	started   time.Time
	mu        sync.Mutex
	state     string // New, Running, Completed, Exception
	ended     time.Time
	estimate  time.Duration
	status    int
	header    http.Header
	body      []byte
	messageID string
	message   string
}

type taskList struct {
	mu     sync.Mutex
	seq    int
	prefix string // Options.TaskPrefix
	tasks  map[string]*task
}

// taskSeq is the sequence number a task ID ends with.
func taskSeq(id string) int {
	n, _ := strconv.Atoi(id[strings.LastIndexByte(id, '-')+1:])
	return n
}

// wantsAsync reports whether the client asked for an asynchronous answer.
func wantsAsync(r *http.Request) bool {
	for _, v := range r.Header.Values("Prefer") {
		for _, p := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(p), "respond-async") {
				return true
			}
		}
	}
	return false
}

// maybeAsync runs fn now, or, when estimate exceeds the threshold or the
// client prefers it, as a task: it answers 202 with the task monitor and
// runs fn in the background with a response recorder.
func (s *Server) maybeAsync(w http.ResponseWriter, r *http.Request, estimate time.Duration, fn func(w http.ResponseWriter, r *http.Request) error) error {
	if !wantsAsync(r) && (s.asyncThreshold <= 0 || estimate <= s.asyncThreshold) {
		return fn(w, r)
	}
	t := s.newTask(r, estimate)
	// The request's body has been read by the caller; the task keeps the
	// request's values (the principal) but not its cancellation. The
	// middleware records the 202; the task gets audit notes of its own,
	// which nothing records, so that it neither races with the middleware
	// nor commits an entry with its outcome.
	bg := r.Clone(context.WithValue(context.WithoutCancel(r.Context()), auditKey{}, &auditInfo{async: true}))
	go func() {
		rec := &rf.Recorder{}
		t.mu.Lock()
		t.state = "Running"
		t.mu.Unlock()
		s.publishTask(t, "TaskEvent.1.0.TaskStarted", fmt.Sprintf("The task with Id '%s' has started.", t.id), "OK")
		if err := fn(rec, bg); err != nil {
			writeError(rec, s.fail(bg, err))
		}
		t.mu.Lock()
		t.status, t.header, t.body, t.ended = rec.Status, rec.Header(), rec.Body.Bytes(), s.now()
		if t.status < 400 {
			t.state = "Completed"
			t.messageID, t.message = "TaskEvent.1.0.TaskCompletedOK", fmt.Sprintf("The task with Id '%s' has completed.", t.id)
		} else {
			t.state = "Exception"
			t.messageID, t.message = "TaskEvent.1.0.TaskAborted", fmt.Sprintf("The task with Id '%s' has been aborted.", t.id)
		}
		msgID, msg := t.messageID, t.message
		t.mu.Unlock()
		sev := "OK"
		if msgID == "TaskEvent.1.0.TaskAborted" {
			sev = "Critical"
		}
		s.publishTask(t, msgID, msg, sev)
	}()
	w.Header().Set("Location", monitorsPath+t.id)
	w.Header().Set("Retry-After", strconv.Itoa(max(1, int((estimate+time.Second-1)/time.Second))))
	writeJSON(w, http.StatusAccepted, s.taskBody(t))
	return nil
}

func (s *Server) now() time.Time { return time.Now().UTC() }

func (s *Server) newTask(r *http.Request, estimate time.Duration) *task {
	s.tasks.mu.Lock()
	defer s.tasks.mu.Unlock()
	s.tasks.seq++
	t := &task{id: s.tasks.prefix + strconv.Itoa(s.tasks.seq), owner: principal(r), method: r.Method, target: r.URL.Path,
		started: s.now(), state: "New", estimate: estimate}
	// Forget finished tasks past retention, and the oldest finished ones
	// beyond maxTasks.
	var done []*task
	for id, old := range s.tasks.tasks {
		old.mu.Lock()
		finished, ended := old.state == "Completed" || old.state == "Exception", old.ended
		old.mu.Unlock()
		if finished && t.started.Sub(ended) > taskRetention {
			delete(s.tasks.tasks, id)
		} else if finished {
			done = append(done, old)
		}
	}
	if len(s.tasks.tasks) >= maxTasks {
		sort.Slice(done, func(i, j int) bool { return done[i].ended.Before(done[j].ended) })
		for _, old := range done[:min(len(done), len(s.tasks.tasks)-maxTasks+1)] {
			delete(s.tasks.tasks, old.id)
		}
	}
	s.tasks.tasks[t.id] = t
	return t
}

func (s *Server) taskBody(t *task) map[string]any {
	t.mu.Lock()
	defer t.mu.Unlock()
	body := map[string]any{
		"@odata.id":   tasksPath + t.id,
		"@odata.type": "#Task.v1_7_0.Task",
		"Id":          t.id,
		"Name":        "Task " + t.id,
		"TaskState":   t.state,
		"TaskStatus":  "OK",
		"StartTime":   t.started.Format(time.RFC3339),
		"TaskMonitor": monitorsPath + t.id,
		"Payload":     map[string]any{"HttpOperation": t.method, "TargetUri": t.target},
		"Messages":    []any{},
		"Oem":         rackpoolOem("Task", map[string]any{"EstimatedFabricMs": t.estimate.Milliseconds(), "Owner": t.owner.User}),
	}
	switch t.state {
	case "Completed":
		body["PercentComplete"] = 100
		body["EndTime"] = t.ended.Format(time.RFC3339)
	case "Exception":
		body["PercentComplete"] = 100
		body["TaskStatus"] = "Critical"
		body["EndTime"] = t.ended.Format(time.RFC3339)
	default:
		body["PercentComplete"] = 0
	}
	if t.messageID != "" {
		body["Messages"] = []any{map[string]any{"MessageId": t.messageID, "Message": t.message, "MessageArgs": []string{t.id}}}
	}
	return body
}

// visibleTask returns task id if r's principal may see it: its owner, an
// account of the same tenant, or an account without a tenant.
func (s *Server) visibleTask(r *http.Request, id string) (*task, error) {
	s.tasks.mu.Lock()
	t := s.tasks.tasks[id]
	s.tasks.mu.Unlock()
	if t == nil {
		return nil, errNotFound("Task", id)
	}
	if !principal(r).Sees(t.owner.Tenant) {
		return nil, s.hide(r, "Task", id)
	}
	return t, nil
}

func (s *Server) getTaskService(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, map[string]any{
		"@odata.id":                       "/redfish/v1/TaskService",
		"@odata.type":                     "#TaskService.v1_2_0.TaskService",
		"Id":                              "TaskService",
		"Name":                            "Task Service",
		"ServiceEnabled":                  true,
		"CompletedTaskOverWritePolicy":    "Oldest",
		"LifeCycleEventOnTaskStateChange": true,
		"DateTime":                        s.now().Format(time.RFC3339),
		"Status":                          map[string]string{"State": "Enabled", "Health": "OK"},
		"Tasks":                           ref("/redfish/v1/TaskService/Tasks"),
		"Oem":                             rackpoolOem("TaskService", map[string]any{"AsyncThresholdMs": s.asyncThreshold.Milliseconds()}),
	})
	return nil
}

func (s *Server) getTasks(w http.ResponseWriter, r *http.Request) error {
	p := principal(r)
	s.tasks.mu.Lock()
	var ids []string
	for id, t := range s.tasks.tasks {
		if p.Sees(t.owner.Tenant) {
			ids = append(ids, id)
		}
	}
	s.tasks.mu.Unlock()
	sort.Slice(ids, func(i, j int) bool { return taskSeq(ids[i]) < taskSeq(ids[j]) })
	var members []odataID
	for _, id := range ids {
		members = append(members, reff("%s%s", tasksPath, id))
	}
	writeJSON(w, http.StatusOK, collection("/redfish/v1/TaskService/Tasks", "TaskCollection", "Task Collection", members))
	return nil
}

func (s *Server) getTask(w http.ResponseWriter, r *http.Request) error {
	t, err := s.visibleTask(r, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.taskBody(t))
	return nil
}

func (s *Server) deleteTask(w http.ResponseWriter, r *http.Request) error {
	t, err := s.visibleTask(r, r.PathValue("id"))
	if err != nil {
		return err
	}
	t.mu.Lock()
	running := t.state == "New" || t.state == "Running"
	t.mu.Unlock()
	if running {
		// Composition workflows run to completion (all or nothing); a task
		// cannot be cancelled half way.
		return newError(http.StatusConflict, baseRegistry+"ResourceInUse",
			"The change to the requested resource failed because the resource is in use or in transition.").
			withResolution("Wait for the task to finish, then delete it.")
	}
	s.tasks.mu.Lock()
	delete(s.tasks.tasks, t.id)
	s.tasks.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) getTaskMonitor(w http.ResponseWriter, r *http.Request) error {
	t, err := s.visibleTask(r, r.PathValue("id"))
	if err != nil {
		return err
	}
	t.mu.Lock()
	running := t.state == "New" || t.state == "Running"
	status, header, body := t.status, t.header, t.body
	t.mu.Unlock()
	if running {
		w.Header().Set("Location", monitorsPath+t.id)
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusAccepted, s.taskBody(t))
		return nil
	}
	for k, vs := range header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.WriteHeader(status)
	_, err = w.Write(body)
	return err
}

// publishTask reports a task's life-cycle event.
func (s *Server) publishTask(t *task, messageID, message, severity string) {
	s.publish(events.Event{Type: events.TypeStatusChange, MessageID: messageID, Message: message, Args: []string{t.id},
		Severity: severity, Origin: tasksPath + t.id, Tenant: t.owner.Tenant})
}
