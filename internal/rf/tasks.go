package rf

import (
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Task monitors (DSP0266 "Asynchronous operations"): a request that a
// service does not finish before it answers is answered 202 Accepted with
// a task monitor in Location (Task.Accept). GET on the monitor answers
// 202 while the task runs and, once it has ended, the answer the request
// would have had, on every GET (Task.Monitor). The Task resource shows
// its state. A service keeps its tasks in a TaskList, its own task type
// embedding *Task beside what only it knows (an owner, a progress).

// Where tasks and their monitors live.
const (
	TaskServicePath = "/redfish/v1/TaskService"
	TasksPath       = TaskServicePath + "/Tasks/"
	MonitorsPath    = TaskServicePath + "/TaskMonitors/"
)

// The TaskState values a Task goes through.
const (
	TaskNew       = "New"
	TaskRunning   = "Running"
	TaskCompleted = "Completed" // it ended with an answer below 400
	TaskException = "Exception" // it ended with an error answer
)

// Task is one request that runs on after the service answered it.
type Task struct {
	ID      string
	Method  string // of the request: the Task's Payload
	Target  string // its path
	Started time.Time

	mu     sync.Mutex
	state  string
	ended  time.Time
	answer *Recorder
}

// NewTask is the task of r with id, started at now, in state New.
func NewTask(id string, r *http.Request, now time.Time) *Task {
	return &Task{ID: id, Method: r.Method, Target: r.URL.Path, Started: now, state: TaskNew}
}

// Base returns t: a service's task type embeds *Task and so is a
// TaskList's element.
func (t *Task) Base() *Task { return t }

// Run marks t running.
func (t *Task) Run() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.state = TaskRunning
}

// End records t's answer at now: Completed for a status below 400,
// Exception otherwise.
func (t *Task) End(answer *Recorder, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.answer, t.ended, t.state = answer, now, TaskCompleted
	if answer.Status >= 400 {
		t.state = TaskException
	}
}

// State returns t's TaskState and, once it has ended, when and with what
// answer.
func (t *Task) State() (state string, ended time.Time, answer *Recorder) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.state, t.ended, t.answer
}

// Ended reports whether t has ended.
func (t *Task) Ended() bool {
	state, _, _ := t.State()
	return state == TaskCompleted || state == TaskException
}

// Body is t's Task resource as far as every service shows it: its state,
// TaskStatus (Critical after an Exception), times, monitor, Payload, no
// Messages, PercentComplete 0 until it ends and 100 after. The service
// adds what it knows more.
func (t *Task) Body() map[string]any {
	state, ended, _ := t.State()
	body := map[string]any{
		"@odata.id":       TasksPath + t.ID,
		"@odata.type":     "#Task.v1_7_0.Task",
		"Id":              t.ID,
		"Name":            "Task " + t.ID,
		"TaskState":       state,
		"TaskStatus":      "OK",
		"StartTime":       t.Started.UTC().Format(time.RFC3339),
		"TaskMonitor":     MonitorsPath + t.ID,
		"Payload":         map[string]any{"HttpOperation": t.Method, "TargetUri": t.Target},
		"Messages":        []any{},
		"PercentComplete": 0,
	}
	if state == TaskCompleted || state == TaskException {
		body["PercentComplete"] = 100
		body["EndTime"] = ended.UTC().Format(time.RFC3339)
	}
	if state == TaskException {
		body["TaskStatus"] = "Critical"
	}
	return body
}

// Accept answers the request t runs for: 202 Accepted with the monitor in
// Location, Retry-After seconds, and body (the Task resource).
func (t *Task) Accept(w http.ResponseWriter, retryAfter int, body any) {
	w.Header().Set("Location", MonitorsPath+t.ID)
	w.Header().Set("Retry-After", strconv.Itoa(retryAfter))
	WriteJSON(w, http.StatusAccepted, body)
}

// Monitor answers a GET of t's monitor: 202 with body() while t runs,
// its answer once it has ended.
func (t *Task) Monitor(w http.ResponseWriter, body func() any) {
	if _, _, answer := t.State(); answer != nil {
		answer.Replay(w)
		return
	}
	t.Accept(w, 1, body())
}

// TaskList is a service's tasks by ID. T is the service's task type,
// which embeds *Task. Finished tasks are kept for Retention after they
// ended; beyond Max tasks, the oldest finished ones are dropped first.
// The zero value keeps every task.
type TaskList[T interface{ Base() *Task }] struct {
	Prefix    string        // begins every ID (a replica's tag)
	Retention time.Duration // how long a finished task stays (0: until Max)
	Max       int           // how many tasks are kept (0: no limit)

	mu    sync.Mutex
	seq   int
	tasks map[string]T
}

// NextID returns a new task ID: Prefix and a sequence number, never
// reused (Reset included).
func (l *TaskList[T]) NextID() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seq++
	return l.Prefix + strconv.Itoa(l.seq)
}

// Add keeps t, first dropping the tasks that ended more than Retention
// before now and, when Max are kept, the oldest finished ones.
func (l *TaskList[T]) Add(t T, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.tasks == nil {
		l.tasks = map[string]T{}
	}
	type done struct {
		id    string
		ended time.Time
	}
	var finished []done
	for id, old := range l.tasks {
		if state, ended, _ := old.Base().State(); state == TaskCompleted || state == TaskException {
			if l.Retention > 0 && now.Sub(ended) > l.Retention {
				delete(l.tasks, id)
				continue
			}
			finished = append(finished, done{id, ended})
		}
	}
	if l.Max > 0 && len(l.tasks) >= l.Max {
		sort.Slice(finished, func(i, j int) bool { return finished[i].ended.Before(finished[j].ended) })
		for _, old := range finished[:min(len(finished), len(l.tasks)-l.Max+1)] {
			delete(l.tasks, old.id)
		}
	}
	l.tasks[t.Base().ID] = t
}

// Get returns task id, unless there is none or it ended more than
// Retention before now (then it is dropped).
func (l *TaskList[T]) Get(id string, now time.Time) (T, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	t, ok := l.tasks[id]
	if !ok {
		return t, false
	}
	if state, ended, _ := t.Base().State(); (state == TaskCompleted || state == TaskException) && l.Retention > 0 && now.Sub(ended) > l.Retention {
		delete(l.tasks, id)
		var none T
		return none, false
	}
	return t, true
}

// IDs lists the IDs of the tasks keep accepts, by sequence number.
func (l *TaskList[T]) IDs(keep func(T) bool) []string {
	l.mu.Lock()
	var ids []string
	for id, t := range l.tasks {
		if keep(t) {
			ids = append(ids, id)
		}
	}
	l.mu.Unlock()
	sort.Slice(ids, func(i, j int) bool { return taskSeq(ids[i]) < taskSeq(ids[j]) })
	return ids
}

// States counts the tasks in each TaskState, every state included.
func (l *TaskList[T]) States() map[string]int {
	counts := map[string]int{TaskNew: 0, TaskRunning: 0, TaskCompleted: 0, TaskException: 0}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, t := range l.tasks {
		state, _, _ := t.Base().State()
		counts[state]++
	}
	return counts
}

// Remove forgets task id.
func (l *TaskList[T]) Remove(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.tasks, id)
}

// Reset forgets every task (a restart); IDs are not reused.
func (l *TaskList[T]) Reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.tasks = map[string]T{}
}

// taskSeq is the sequence number a task ID ends with.
func taskSeq(id string) int {
	n, _ := strconv.Atoi(id[strings.LastIndexByte(id, '-')+1:])
	return n
}

// TaskCollection is the body of the Tasks collection of ids.
func TaskCollection(ids []string) map[string]any {
	members := make([]ODataID, 0, len(ids))
	for _, id := range ids {
		members = append(members, Ref(TasksPath+id))
	}
	return Collection(strings.TrimSuffix(TasksPath, "/"), "TaskCollection", "Task Collection", members)
}

// TaskService is the body of the TaskService resource at now: it
// overwrites the oldest completed tasks, and sends an event on every
// task's change of state when lifeCycleEvents.
func TaskService(now time.Time, lifeCycleEvents bool) map[string]any {
	return map[string]any{
		"@odata.id":                       TaskServicePath,
		"@odata.type":                     "#TaskService.v1_2_0.TaskService",
		"Id":                              "TaskService",
		"Name":                            "Task Service",
		"ServiceEnabled":                  true,
		"CompletedTaskOverWritePolicy":    "Oldest",
		"LifeCycleEventOnTaskStateChange": lifeCycleEvents,
		"DateTime":                        now.UTC().Format(time.RFC3339),
		"Status":                          map[string]string{"State": "Enabled", "Health": "OK"},
		"Tasks":                           Ref(strings.TrimSuffix(TasksPath, "/")),
	}
}
