package rf

import (
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"

	"rackpool/internal/clock"
)

// job is a service's task: rf.Task and what only the service knows.
type job struct {
	*Task
	owner string
}

func endWith(t *Task, status int, now time.Time) {
	rec := &Recorder{}
	WriteJSON(rec, status, map[string]string{"Id": t.ID})
	t.End(rec, now)
}

func TestTaskLifeCycle(t *testing.T) {
	clk := clock.NewManual(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	r := httptest.NewRequest("POST", "/redfish/v1/Systems", nil)
	tk := NewTask("7", r, clk.Now())
	body := tk.Body()
	if body["TaskState"] != TaskNew || body["PercentComplete"] != 0 || body["TaskMonitor"] != MonitorsPath+"7" ||
		!reflect.DeepEqual(body["Payload"], map[string]any{"HttpOperation": "POST", "TargetUri": "/redfish/v1/Systems"}) {
		t.Fatalf("new: %v", body)
	}
	tk.Run()
	w := httptest.NewRecorder()
	tk.Monitor(w, func() any { return tk.Body() })
	if w.Code != http.StatusAccepted || w.Header().Get("Location") != MonitorsPath+"7" || w.Header().Get("Retry-After") != "1" {
		t.Fatalf("monitor while running: %d %v", w.Code, w.Header())
	}
	clk.Advance(3 * time.Second)
	endWith(tk, http.StatusCreated, clk.Now())
	if !tk.Ended() {
		t.Fatal("not ended")
	}
	body = tk.Body()
	if body["TaskState"] != TaskCompleted || body["TaskStatus"] != "OK" || body["PercentComplete"] != 100 || body["EndTime"] != "2026-01-02T03:04:08Z" {
		t.Fatalf("completed: %v", body)
	}
	for range 2 { // every GET of the monitor answers the final answer
		w = httptest.NewRecorder()
		tk.Monitor(w, func() any { t.Fatal("body of an ended task"); return nil })
		if w.Code != http.StatusCreated || w.Body.String() != "{\n  \"Id\": \"7\"\n}\n" {
			t.Fatalf("monitor once done: %d %s", w.Code, w.Body)
		}
	}
	failed := NewTask("8", r, clk.Now())
	endWith(failed, http.StatusConflict, clk.Now())
	if b := failed.Body(); b["TaskState"] != TaskException || b["TaskStatus"] != "Critical" {
		t.Fatalf("failed: %v", b)
	}
}

func TestTaskListRetention(t *testing.T) {
	clk := clock.NewManual(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	l := &TaskList[*job]{Prefix: "r1-", Retention: time.Minute, Max: 3}
	r := httptest.NewRequest("DELETE", "/redfish/v1/Systems/s1", nil)
	add := func(owner string) *job {
		j := &job{Task: NewTask(l.NextID(), r, clk.Now()), owner: owner}
		l.Add(j, clk.Now())
		return j
	}
	a, b := add("alice"), add("bob")
	if a.ID != "r1-1" || b.ID != "r1-2" {
		t.Fatalf("IDs %s, %s", a.ID, b.ID)
	}
	endWith(a.Task, http.StatusOK, clk.Now())
	clk.Advance(2 * time.Minute)
	if _, ok := l.Get(a.ID, clk.Now()); ok {
		t.Error("a task finished past retention is still there")
	}
	if got, ok := l.Get(b.ID, clk.Now()); !ok || got.owner != "bob" {
		t.Errorf("a running task: %v, %v", got, ok)
	}
	// Beyond Max, the oldest finished tasks go first; running ones stay.
	endWith(b.Task, http.StatusOK, clk.Now())
	c := add("carol")
	clk.Advance(time.Second)
	endWith(c.Task, http.StatusOK, clk.Now())
	d := add("dave")
	e := add("eve")
	if ids := l.IDs(func(*job) bool { return true }); !reflect.DeepEqual(ids, []string{c.ID, d.ID, e.ID}) {
		t.Errorf("kept %v, want %v", ids, []string{c.ID, d.ID, e.ID})
	}
	if ids := l.IDs(func(j *job) bool { return j.owner != "dave" }); !reflect.DeepEqual(ids, []string{c.ID, e.ID}) {
		t.Errorf("filtered %v", ids)
	}
	if got := l.States(); !reflect.DeepEqual(got, map[string]int{TaskNew: 2, TaskRunning: 0, TaskCompleted: 1, TaskException: 0}) {
		t.Errorf("States = %v", got)
	}
	l.Remove(c.ID)
	l.Reset()
	if ids := l.IDs(func(*job) bool { return true }); len(ids) != 0 {
		t.Errorf("after Reset: %v", ids)
	}
	if id := l.NextID(); id != "r1-6" {
		t.Errorf("ID after Reset %s, want r1-6 (never reused)", id)
	}
}

func TestTaskListOrder(t *testing.T) {
	var l TaskList[*job] // the zero value keeps every task
	r := httptest.NewRequest("POST", "/x", nil)
	for range 12 {
		l.Add(&job{Task: NewTask(l.NextID(), r, time.Time{})}, time.Time{})
	}
	ids := l.IDs(func(*job) bool { return true })
	if len(ids) != 12 || ids[1] != "2" || ids[9] != "10" || ids[11] != "12" {
		t.Errorf("IDs in sequence order: %v", ids)
	}
	if body := TaskCollection(ids[:2]); body["Members@odata.count"] != 2 || body["@odata.id"] != "/redfish/v1/TaskService/Tasks" {
		t.Errorf("collection %v", body)
	}
	if body := TaskService(time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600)), true); body["DateTime"] != "2026-01-02T02:04:05Z" ||
		body["LifeCycleEventOnTaskStateChange"] != true {
		t.Errorf("task service %v", body)
	}
}
