package redfish

import (
	"context"
	"fmt"
	"net/http"
	"rackpool/internal/tenancy"
	"strconv"
	"time"

	"rackpool/internal/events"
	"rackpool/internal/store"
)

// logRoutes are the routes of Managers, their LogServices (audit, events)
// and their network resources (routes.go).
var logRoutes = []route{
	{"GET /redfish/v1/Managers", login, (*Server).getManagers},
	{"GET /redfish/v1/Managers/rackpool", login, (*Server).getManager},
	{"GET /redfish/v1/Managers/rackpool/LogServices", login, (*Server).getLogServices},
	{"GET /redfish/v1/Managers/rackpool/LogServices/Audit", login, (*Server).getAuditService},
	{"GET /redfish/v1/Managers/rackpool/LogServices/Audit/Entries", login, (*Server).getAuditEntries},
	{"GET /redfish/v1/Managers/rackpool/LogServices/Audit/Entries/{id}", login, (*Server).getAuditEntry},
	{"GET /redfish/v1/Managers/rackpool/LogServices/Events", login, (*Server).getEventLogService},
	{"GET /redfish/v1/Managers/rackpool/LogServices/Events/Entries", login, (*Server).getEventEntries},
	{"GET /redfish/v1/Managers/rackpool/LogServices/Events/Entries/{id}", login, (*Server).getEventEntry},
	// The Manager's own network (manager_net.go).
	{"GET /redfish/v1/Managers/rackpool/EthernetInterfaces", login, (*Server).getEthernetInterfaces},
	{"GET /redfish/v1/Managers/rackpool/EthernetInterfaces/{id}", login, (*Server).getEthernetInterface},
	{"GET /redfish/v1/Managers/rackpool/NetworkProtocol", login, (*Server).getNetworkProtocol},
}

// Audit log: every request that could change something (every method but
// GET and HEAD) and every refused request is recorded durably before its
// response leaves: who (account, tenant, remote address), when, what
// (method, path, the route's action) and the outcome (success, failure,
// denied) with the status code and, for errors, the message ID. Request
// bodies are never recorded, so passwords and tokens never reach the log.
// The log is read through Managers/rackpool/LogServices/Audit/Entries
// (administrators see all entries, a tenant's accounts their tenant's)
// and exported with `rackpool audit`.

const (
	managerPath = "/redfish/v1/Managers/rackpool"
	auditPath   = managerPath + "/LogServices/Audit"
	eventLog    = managerPath + "/LogServices/Events"
)

// auditInfo is what a handler may add to its request's audit entry.
type auditInfo struct {
	user   string // for public routes (login): the account named
	detail string
	action string // the route's pattern
	// pending is the entry a workflow commits with its outcome
	// (auditInCommit), answered with status pendingStatus on success.
	pending       *store.PendingAudit
	pendingStatus int
	// async: the request was answered 202 and its work runs as a task.
	async bool
	// routine: a successful request that changed nothing worth a record
	// (a blocknode heartbeat ten times a second); it is not audited.
	routine bool
}

type auditKey struct{}

// noteAudit lets a handler annotate its request's audit entry.
func noteAudit(r *http.Request) *auditInfo {
	if a, ok := r.Context().Value(auditKey{}).(*auditInfo); ok {
		return a
	}
	return &auditInfo{}
}

// auditInCommit returns the context for a workflow that ends in one
// outcome commit and whose success the handler answers with status: the
// workflow commits the request's audit entry in that same commit
// (store.PendingAudit), so the request costs one durable commit instead of
// two, and the middleware does not append the entry again. A request
// answered 202 (its workflow runs as a task) keeps its own entry and gets
// its context unchanged.
func (s *Server) auditInCommit(r *http.Request, status int) context.Context {
	info, ok := r.Context().Value(auditKey{}).(*auditInfo)
	if !ok || info.async || s.store == nil {
		return r.Context()
	}
	p := principal(r)
	info.pending = store.NewPendingAudit(store.AuditEntry{User: p.User, Tenant: p.Tenant, Remote: r.RemoteAddr,
		Method: r.Method, Target: r.URL.Path, Action: info.action, Outcome: store.AuditSuccess, Status: status})
	info.pendingStatus = status
	return store.WithPendingAudit(r.Context(), info.pending)
}

// audit appends one entry. A failure to write is logged and counted; the
// request's answer stands.
func (s *Server) audit(ctx context.Context, e store.AuditEntry) {
	if s.store == nil {
		return
	}
	if e.Time.IsZero() {
		e.Time = time.Now().UTC()
	}
	if _, err := s.store.AppendAudit(context.WithoutCancel(ctx), e); err != nil {
		s.metrics.auditFailed.Inc()
		s.log.Error("audit log write failed", "err", err, "user", e.User, "action", e.Action, "target", e.Target)
	}
}

// auditRequest records a finished request.
func (s *Server) auditRequest(r *http.Request, p tenancy.Principal, action string, status int, info *auditInfo, errID string) {
	if info.pending.Recorded() && status == info.pendingStatus {
		return // committed with the workflow's outcome
	}
	if info.routine && status < 400 {
		return
	}
	outcome := store.AuditSuccess
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		outcome = store.AuditDenied
	case status >= 400:
		outcome = store.AuditFailure
	}
	user := p.User
	if user == "" {
		user = info.user
	}
	detail := info.detail
	if errID != "" {
		if detail != "" {
			detail += "; "
		}
		detail += errID
	}
	if status == http.StatusAccepted && detail == "" {
		detail = "accepted as a task"
	}
	s.audit(r.Context(), store.AuditEntry{User: user, Tenant: p.Tenant, Remote: r.RemoteAddr, Method: r.Method,
		Target: r.URL.Path, Action: action, Outcome: outcome, Status: status, Detail: detail})
	if outcome == store.AuditDenied {
		s.metrics.refusals.With(strconv.Itoa(status)).Inc()
	}
}

func (s *Server) getManagers(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, collection("/redfish/v1/Managers", "ManagerCollection", "Manager Collection", []odataID{ref(managerPath)}))
	return nil
}

func (s *Server) getManager(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, map[string]any{
		"@odata.id":             managerPath,
		"@odata.type":           "#Manager.v1_19_0.Manager",
		"Id":                    "rackpool",
		"Name":                  "rackpool control plane",
		"ManagerType":           "Service",
		"UUID":                  s.uuid,
		"FirmwareVersion":       Version,
		"ServiceEntryPointUUID": s.uuid,
		"DateTime":              time.Now().UTC().Format(time.RFC3339),
		"Status":                map[string]string{"State": "Enabled", "Health": "OK"},
		"LogServices":           ref(managerPath + "/LogServices"),
		"EthernetInterfaces":    ref(ethernetPath),
		"NetworkProtocol":       ref(networkProtocolPath),
	})
	return nil
}

// Version is the service's version, set by main.
var Version = "dev"

func (s *Server) getLogServices(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, collection(managerPath+"/LogServices", "LogServiceCollection", "Log Services",
		[]odataID{ref(auditPath), ref(eventLog)}))
	return nil
}

func logServiceBody(path, id, name, desc string, max int) map[string]any {
	return map[string]any{
		"@odata.id":          path,
		"@odata.type":        "#LogService.v1_5_0.LogService",
		"Id":                 id,
		"Name":               name,
		"Description":        desc,
		"ServiceEnabled":     true,
		"OverWritePolicy":    map[bool]string{true: "NeverOverWrites", false: "WrapsWhenFull"}[max == 0],
		"DateTime":           time.Now().UTC().Format(time.RFC3339),
		"LogEntryType":       "OEM",
		"Status":             map[string]string{"State": "Enabled", "Health": "OK"},
		"Entries":            ref(path + "/Entries"),
		"MaxNumberOfRecords": max,
	}
}

func (s *Server) getAuditService(w http.ResponseWriter, r *http.Request) error {
	body := logServiceBody(auditPath, "Audit", "Audit Log",
		"Every mutation and every refused request: who, when, what and the outcome.", 0)
	delete(body, "MaxNumberOfRecords")
	writeJSON(w, http.StatusOK, body)
	return nil
}

func auditEntryBody(e store.AuditEntry) map[string]any {
	sev := "OK"
	switch e.Outcome {
	case store.AuditFailure:
		sev = "Warning"
	case store.AuditDenied:
		sev = "Critical"
	}
	id := strconv.FormatInt(e.ID, 10)
	body := map[string]any{
		"@odata.id":       auditPath + "/Entries/" + id,
		"@odata.type":     "#LogEntry.v1_15_0.LogEntry",
		"Id":              id,
		"Name":            "Audit entry " + id,
		"EntryType":       "Oem",
		"OemRecordFormat": "Rackpool",
		"Created":         e.Time.UTC().Format(time.RFC3339Nano),
		"Severity":        sev,
		"Message":         fmt.Sprintf("%s %s %s by %q: %s (%d)", e.Action, e.Method, e.Target, e.User, e.Outcome, e.Status),
		"Oem": rackpoolOem("AuditEntry", map[string]any{
			"User": e.User, "Tenant": e.Tenant, "Remote": e.Remote, "Method": e.Method, "Target": e.Target,
			"Action": e.Action, "Outcome": e.Outcome, "Status": e.Status, "Detail": e.Detail,
		}),
	}
	oem := body["Oem"].(map[string]any)["Rackpool"].(map[string]any)
	for k, v := range oem {
		if v == "" {
			delete(oem, k) // Redfish: omit what is empty
		}
	}
	return body
}

// auditQuery reads the paging and filter parameters: after, limit, user,
// outcome, since, until (RFC 3339). A tenant's accounts are confined to
// their tenant.
func auditQuery(r *http.Request) (store.AuditQuery, error) {
	q := r.URL.Query()
	var aq store.AuditQuery
	if v := q.Get("after"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return aq, errQueryValue("after", v)
		}
		aq.AfterID = n
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > store.MaxAuditLimit {
			return aq, errQueryValue("limit", v)
		}
		aq.Limit = n
	}
	aq.User, aq.Outcome = q.Get("user"), q.Get("outcome")
	for name, dst := range map[string]*time.Time{"since": &aq.Since, "until": &aq.Until} {
		if v := q.Get(name); v != "" {
			t, err := time.Parse(time.RFC3339, v)
			if err != nil {
				return aq, errQueryValue(name, v)
			}
			*dst = t
		}
	}
	if p := principal(r); p.Tenant != "" {
		aq.Tenant = p.Tenant
	} else {
		aq.Tenant = q.Get("tenant")
	}
	return aq, nil
}

func errQueryValue(name, value string) *apiError {
	return newError(http.StatusBadRequest, baseRegistry+"QueryParameterValueFormatError",
		fmt.Sprintf("The value '%s' for the parameter %s is not a format that the parameter can accept.", value, name), value, name)
}

func (s *Server) getAuditEntries(w http.ResponseWriter, r *http.Request) error {
	if s.store == nil {
		return errNotFound("LogService", "Audit")
	}
	aq, err := auditQuery(r)
	if err != nil {
		return err
	}
	entries, err := s.store.Audit(r.Context(), aq)
	if err != nil {
		return err
	}
	members := make([]map[string]any, 0, len(entries))
	for _, e := range entries {
		members = append(members, auditEntryBody(e))
	}
	body := map[string]any{
		"@odata.id":           auditPath + "/Entries",
		"@odata.type":         "#LogEntryCollection.LogEntryCollection",
		"Name":                "Audit Log Entries",
		"Members":             members,
		"Members@odata.count": len(members),
	}
	if len(entries) == aq.EffectiveLimit() {
		next := r.URL.Query()
		next.Set("after", strconv.FormatInt(entries[len(entries)-1].ID, 10))
		body["Oem"] = rackpoolOem("LogEntryCollection", map[string]any{"NextPage": auditPath + "/Entries?" + next.Encode()})
	}
	writeJSON(w, http.StatusOK, body)
	return nil
}

func (s *Server) getAuditEntry(w http.ResponseWriter, r *http.Request) error {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id < 1 || s.store == nil {
		return errNotFound("LogEntry", r.PathValue("id"))
	}
	aq := store.AuditQuery{AfterID: id - 1, Limit: 1}
	if p := principal(r); p.Tenant != "" {
		aq.Tenant = p.Tenant
	}
	entries, err := s.store.Audit(r.Context(), aq)
	if err != nil {
		return err
	}
	if len(entries) == 0 || entries[0].ID != id {
		return errNotFound("LogEntry", r.PathValue("id"))
	}
	writeJSON(w, http.StatusOK, auditEntryBody(entries[0]))
	return nil
}

func (s *Server) getEventLogService(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, logServiceBody(eventLog, "Events", "Event Log",
		"The most recent events (composition changes, faults, thresholds, tasks), kept in memory.", events.DefaultHistory))
	return nil
}

func (s *Server) getEventEntries(w http.ResponseWriter, r *http.Request) error {
	p := principal(r)
	evs := s.events.Recent(events.DefaultHistory, func(e events.Event) bool { return events.Visible(p.Tenant, e) })
	members := make([]map[string]any, 0, len(evs))
	for _, e := range evs {
		members = append(members, eventEntryBody(e))
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"@odata.id":           eventLog + "/Entries",
		"@odata.type":         "#LogEntryCollection.LogEntryCollection",
		"Name":                "Event Log Entries",
		"Members":             members,
		"Members@odata.count": len(members),
	})
	return nil
}

func (s *Server) getEventEntry(w http.ResponseWriter, r *http.Request) error {
	p := principal(r)
	id := r.PathValue("id")
	for _, e := range s.events.Recent(events.DefaultHistory, func(e events.Event) bool { return events.Visible(p.Tenant, e) }) {
		if strconv.FormatUint(e.ID, 10) == id {
			writeJSON(w, http.StatusOK, eventEntryBody(e))
			return nil
		}
	}
	return errNotFound("LogEntry", id)
}

func eventEntryBody(e events.Event) map[string]any {
	id := strconv.FormatUint(e.ID, 10)
	entry := map[string]any{
		"@odata.id":   eventLog + "/Entries/" + id,
		"@odata.type": "#LogEntry.v1_15_0.LogEntry",
		"Id":          id,
		"Name":        "Event " + id,
		"EntryType":   "Event",
		"Created":     e.Time.UTC().Format(time.RFC3339Nano),
		"Severity":    e.Severity,
		"Message":     e.Message,
		"MessageId":   e.MessageID,
		"MessageArgs": nonNil(e.Args),
	}
	if e.Origin != "" {
		entry["Links"] = map[string]any{"OriginOfCondition": ref(e.Origin)}
	}
	return entry
}
