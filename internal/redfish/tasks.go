package redfish

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"rackpool/internal/redfish/service"
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
	tasksPath     = rf.TasksPath
	monitorsPath  = rf.MonitorsPath
	taskRetention = time.Hour
	maxTasks      = 1000
)

// task is one request running on as a task: rf.Task, its owner (who may
// see it) and the modelled fabric time it was estimated at.
type task struct {
	*rf.Task
	owner    tenancy.Principal
	estimate time.Duration
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
	now := s.now()
	t := &task{Task: rf.NewTask(s.tasks.NextID(), r, now), owner: principal(r), estimate: estimate}
	s.tasks.Add(t, now)
	// The request's body has been read by the caller; the task keeps the
	// request's values (the principal) but not its cancellation. The
	// middleware records the 202; the task gets audit notes of its own,
	// which nothing records, so that it neither races with the middleware
	// nor commits an entry with its outcome.
	bg := r.Clone(service.WithNotes(context.WithoutCancel(r.Context()), &auditInfo{async: true}))
	go func() {
		rec := &rf.Recorder{}
		t.Run()
		s.publishTask(t, "TaskEvent.1.0.TaskStarted", fmt.Sprintf("The task with Id '%s' has started.", t.ID), "OK")
		if err := fn(rec, bg); err != nil {
			writeError(rec, s.fail(bg, err))
		}
		t.End(rec, s.now())
		msgID, msg := taskMessage(t)
		sev := "OK"
		if msgID == "TaskEvent.1.0.TaskAborted" {
			sev = "Critical"
		}
		s.publishTask(t, msgID, msg, sev)
	}()
	t.Accept(w, max(1, int((estimate+time.Second-1)/time.Second)), s.taskBody(t))
	return nil
}

// taskMessage is the TaskEvent message of how t ended, "" while it runs.
func taskMessage(t *task) (id, message string) {
	switch state, _, _ := t.State(); state {
	case rf.TaskCompleted:
		return "TaskEvent.1.0.TaskCompletedOK", fmt.Sprintf("The task with Id '%s' has completed.", t.ID)
	case rf.TaskException:
		return "TaskEvent.1.0.TaskAborted", fmt.Sprintf("The task with Id '%s' has been aborted.", t.ID)
	}
	return "", ""
}

func (s *Server) now() time.Time { return time.Now().UTC() }

func (s *Server) taskBody(t *task) map[string]any {
	body := t.Body()
	body["Oem"] = rackpoolOem("Task", map[string]any{"EstimatedFabricMs": t.estimate.Milliseconds(), "Owner": t.owner.User})
	if id, msg := taskMessage(t); id != "" {
		body["Messages"] = []any{map[string]any{"MessageId": id, "Message": msg, "MessageArgs": []string{t.ID}}}
	}
	return body
}

// visibleTask returns task id if r's principal may see it: its owner, an
// account of the same tenant, or an account without a tenant.
func (s *Server) visibleTask(r *http.Request, id string) (*task, error) {
	t, ok := s.tasks.Get(id, s.now())
	if !ok {
		return nil, errNotFound("Task", id)
	}
	if !principal(r).Sees(t.owner.Tenant) {
		return nil, s.hide(r, "Task", id)
	}
	return t, nil
}

func (s *Server) getTaskService(w http.ResponseWriter, r *http.Request) error {
	body := rf.TaskService(s.now(), true)
	body["Oem"] = rackpoolOem("TaskService", map[string]any{"AsyncThresholdMs": s.asyncThreshold.Milliseconds()})
	writeJSON(w, http.StatusOK, body)
	return nil
}

func (s *Server) getTasks(w http.ResponseWriter, r *http.Request) error {
	p := principal(r)
	ids := s.tasks.IDs(func(t *task) bool { return p.Sees(t.owner.Tenant) })
	if s.gather != nil {
		// Every active replica lists every replica's tasks: each runs
		// its own, and answers for them (its tag begins their IDs).
		bodies, err := s.gather(r, rf.TasksPath[:len(rf.TasksPath)-1])
		if err != nil {
			return newError(http.StatusServiceUnavailable, baseRegistry+"ServiceTemporarilyUnavailable",
				"The service is temporarily unavailable.  Retry in 1 seconds.", "1").
				withResolution("Another replica's tasks could not be read (" + err.Error() + "). Retry shortly.")
		}
		for _, b := range bodies {
			var c struct{ Members []rf.ODataID }
			if err := json.Unmarshal(b, &c); err != nil {
				return fmt.Errorf("another replica's task collection: %w", err)
			}
			for _, m := range c.Members {
				ids = append(ids, strings.TrimPrefix(m.ID, rf.TasksPath))
			}
		}
		slices.SortFunc(ids, compareTaskIDs)
	}
	writeJSON(w, http.StatusOK, rf.TaskCollection(ids))
	return nil
}

// compareTaskIDs orders task IDs by the replica's tag that begins them,
// then by number ("3f9a1c02de-4" before "3f9a1c02de-10").
func compareTaskIDs(a, b string) int {
	pa, na := splitTaskID(a)
	pb, nb := splitTaskID(b)
	if c := strings.Compare(pa, pb); c != 0 {
		return c
	}
	if na != nb {
		return cmp.Compare(na, nb)
	}
	return strings.Compare(a, b)
}

func splitTaskID(id string) (string, int) {
	i := strings.LastIndex(id, "-")
	n, err := strconv.Atoi(id[i+1:])
	if err != nil {
		return id, 0
	}
	return id[:i+1], n
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
	if !t.Ended() {
		// Composition workflows run to completion (all or nothing); a task
		// cannot be cancelled half way.
		return newError(http.StatusConflict, baseRegistry+"ResourceInUse",
			"The change to the requested resource failed because the resource is in use or in transition.").
			withResolution("Wait for the task to finish, then delete it.")
	}
	s.tasks.Remove(t.ID)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) getTaskMonitor(w http.ResponseWriter, r *http.Request) error {
	t, err := s.visibleTask(r, r.PathValue("id"))
	if err != nil {
		return err
	}
	t.Monitor(w, func() any { return s.taskBody(t) })
	return nil
}

// publishTask reports a task's life-cycle event.
func (s *Server) publishTask(t *task, messageID, message, severity string) {
	s.publish(events.Event{Type: events.TypeStatusChange, MessageID: messageID, Message: message, Args: []string{t.ID},
		Severity: severity, Origin: tasksPath + t.ID, Tenant: t.owner.Tenant})
}
