package managers

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"rackpool/internal/events"
	"rackpool/internal/odata"
	"rackpool/internal/redfish/service"
	"rackpool/internal/rf"
	"rackpool/internal/store"
)

// The Manager's LogServices: the audit log (the core's audit.go records it) and the
// event log (the bus's retained events).

// logRoutes are the routes of the Manager's LogServices.
var logRoutes = []service.Route[*Service]{
	{Pattern: "GET /redfish/v1/Managers/rackpool/LogServices", Priv: service.Login, Handler: (*Service).getLogServices},
	{Pattern: "GET /redfish/v1/Managers/rackpool/LogServices/Audit", Priv: service.Login, Handler: (*Service).getAuditService},
	{Pattern: "GET /redfish/v1/Managers/rackpool/LogServices/Audit/Entries", Priv: service.Login, Handler: (*Service).getAuditEntries},
	{Pattern: "GET /redfish/v1/Managers/rackpool/LogServices/Audit/Entries/{id}", Priv: service.Login, Handler: (*Service).getAuditEntry},
	{Pattern: "GET /redfish/v1/Managers/rackpool/LogServices/Events", Priv: service.Login, Handler: (*Service).getEventLogService},
	{Pattern: "GET /redfish/v1/Managers/rackpool/LogServices/Events/Entries", Priv: service.Login, Handler: (*Service).getEventEntries},
	{Pattern: "GET /redfish/v1/Managers/rackpool/LogServices/Events/Entries/{id}", Priv: service.Login, Handler: (*Service).getEventEntry},
}

func (s *Service) getLogServices(w http.ResponseWriter, r *http.Request) error {
	service.WriteJSON(w, http.StatusOK, rf.Collection(managerPath+"/LogServices", "LogServiceCollection", "Log Services",
		[]rf.ODataID{rf.Ref(auditPath), rf.Ref(eventLog)}))
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
		"Entries":            rf.Ref(path + "/Entries"),
		"MaxNumberOfRecords": max,
	}
}

func (s *Service) getAuditService(w http.ResponseWriter, r *http.Request) error {
	body := logServiceBody(auditPath, "Audit", "Audit Log",
		"Every mutation and every refused request: who, when, what and the outcome.", 0)
	delete(body, "MaxNumberOfRecords")
	service.WriteJSON(w, http.StatusOK, body)
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
	msgID := cmp.Or(e.MessageID, store.AuditMessage(e.Outcome, e.Status))
	body := map[string]any{
		"@odata.id":       auditPath + "/Entries/" + id,
		"@odata.type":     "#LogEntry.v1_15_0.LogEntry",
		"Id":              id,
		"Name":            "Audit entry " + id,
		"EntryType":       "Oem",
		"OemRecordFormat": "Rackpool",
		"Created":         e.Time.UTC().Format(time.RFC3339Nano),
		"Severity":        sev,
		"MessageId":       msgID,
		"Message":         auditMessage(e, msgID),
		"Oem": service.RackpoolOem("AuditEntry", map[string]any{
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

// auditMessage says once who did what, how it ended and, when the entry
// has one, the note: "alice POST /redfish/v1/Systems: Created (201):
// composed sys-3". A named action (Provisioning) leads when it is not the
// route itself; a refusal says "denied", a failure "failed".
func auditMessage(e store.AuditEntry, msgID string) string {
	what := strings.TrimSpace(e.Method + " " + e.Target)
	if e.Action != "" && !strings.HasPrefix(e.Action, e.Method+" ") {
		what = strings.TrimSpace(e.Action + " " + what)
	}
	outcome := msgID[strings.LastIndexByte(msgID, '.')+1:]
	switch e.Outcome {
	case store.AuditFailure:
		outcome = "failed, " + outcome
	case store.AuditDenied:
		outcome = "denied, " + outcome
	}
	msg := fmt.Sprintf("%s %s: %s (%d)", cmp.Or(e.User, "anonymous"), what, outcome, e.Status)
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	return msg
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
			return aq, service.ErrQueryValue("after", v)
		}
		aq.AfterID = n
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > store.MaxAuditLimit {
			return aq, service.ErrQueryValue("limit", v)
		}
		aq.Limit = n
	}
	aq.User, aq.Outcome = q.Get("user"), q.Get("outcome")
	for name, dst := range map[string]*time.Time{"since": &aq.Since, "until": &aq.Until} {
		if v := q.Get(name); v != "" {
			t, err := time.Parse(time.RFC3339, v)
			if err != nil {
				return aq, service.ErrQueryValue(name, v)
			}
			*dst = t
		}
	}
	if p := service.Principal(r); p.Tenant != "" {
		aq.Tenant = p.Tenant
	} else {
		aq.Tenant = q.Get("tenant")
	}
	return aq, nil
}

func (s *Service) getAuditEntries(w http.ResponseWriter, r *http.Request) error {
	if s.store == nil {
		return rf.NotFound("LogService", "Audit")
	}
	aq, err := auditQuery(r)
	if err != nil {
		return err
	}
	total, err := s.store.AuditMatching(r.Context(), aq)
	if err != nil {
		return err
	}
	l := &auditList{ctx: r.Context(), log: s.store, q: aq, total: int(total)}
	// Read the page's entries now, so that a failed read is this
	// request's error rather than a short page.
	skip, _ := strconv.Atoi(r.URL.Query().Get("$skip"))
	top := aq.EffectiveLimit()
	if v := r.URL.Query().Get("$top"); v != "" {
		top, _ = strconv.Atoi(v)
	}
	if err := l.read(skip, min(top, odata.MaxPage)); err != nil {
		return err
	}
	c := &odata.Collection{
		Head: map[string]any{
			"@odata.id":   auditPath + "/Entries",
			"@odata.type": "#LogEntryCollection.LogEntryCollection",
			"Name":        "Audit Log Entries",
		},
		Members:  l,
		Expanded: true,
		PageSize: aq.EffectiveLimit(),
	}
	service.WriteJSON(w, http.StatusOK, c)
	return nil
}

// auditList is the audit entries a query selects, in ID order: the audit
// table's primary key is the index a page is cut from (odata.Members).
// Entries are read a window at a time, from the page's first member on.
type auditList struct {
	ctx   context.Context
	log   AuditLog
	q     store.AuditQuery
	total int
	start int // position of window[0]
	win   []store.AuditEntry
}

// Len implements odata.Members.
func (l *auditList) Len() int { return l.total }

// Path implements odata.Members.
func (l *auditList) Path(i int) string {
	if e, ok := l.at(i); ok {
		return auditPath + "/Entries/" + strconv.FormatInt(e.ID, 10)
	}
	return auditPath + "/Entries/0"
}

// Body implements odata.Bodies.
func (l *auditList) Body(i int) any {
	if e, ok := l.at(i); ok {
		return auditEntryBody(e)
	}
	return nil
}

// read reads entries [from, from+n) (those that exist) into the window.
func (l *auditList) read(from, n int) error {
	l.start, l.win = from, nil
	for len(l.win) < n {
		q := l.q
		q.Offset, q.Limit = from+len(l.win), min(n-len(l.win), store.MaxAuditLimit)
		got, err := l.log.Audit(l.ctx, q)
		if err != nil {
			return err
		}
		l.win = append(l.win, got...)
		if len(got) < q.Limit {
			break
		}
	}
	return nil
}

// at returns entry i, reading the window that starts there if needed (a
// $filter reads the whole log); false when it cannot be read.
func (l *auditList) at(i int) (store.AuditEntry, bool) {
	if i < l.start || i >= l.start+len(l.win) {
		if err := l.read(i, store.MaxAuditLimit); err != nil || len(l.win) == 0 {
			return store.AuditEntry{}, false
		}
	}
	return l.win[i-l.start], true
}

func (s *Service) getAuditEntry(w http.ResponseWriter, r *http.Request) error {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id < 1 || s.store == nil {
		return rf.NotFound("LogEntry", r.PathValue("id"))
	}
	aq := store.AuditQuery{AfterID: id - 1, Limit: 1}
	if p := service.Principal(r); p.Tenant != "" {
		aq.Tenant = p.Tenant
	}
	entries, err := s.store.Audit(r.Context(), aq)
	if err != nil {
		return err
	}
	if len(entries) == 0 || entries[0].ID != id {
		return rf.NotFound("LogEntry", r.PathValue("id"))
	}
	service.WriteJSON(w, http.StatusOK, auditEntryBody(entries[0]))
	return nil
}

func (s *Service) getEventLogService(w http.ResponseWriter, r *http.Request) error {
	service.WriteJSON(w, http.StatusOK, logServiceBody(eventLog, "Events", "Event Log",
		"The most recent events (composition changes, faults, thresholds, tasks), kept in memory.", events.DefaultHistory))
	return nil
}

func (s *Service) getEventEntries(w http.ResponseWriter, r *http.Request) error {
	p := service.Principal(r)
	evs := s.events.Recent(events.DefaultHistory, func(e events.Event) bool { return events.Visible(p.Tenant, e) })
	members := make([]map[string]any, 0, len(evs))
	for _, e := range evs {
		members = append(members, eventEntryBody(e))
	}
	service.WriteJSON(w, http.StatusOK, map[string]any{
		"@odata.id":           eventLog + "/Entries",
		"@odata.type":         "#LogEntryCollection.LogEntryCollection",
		"Name":                "Event Log Entries",
		"Members":             members,
		"Members@odata.count": len(members),
	})
	return nil
}

func (s *Service) getEventEntry(w http.ResponseWriter, r *http.Request) error {
	p := service.Principal(r)
	id := r.PathValue("id")
	for _, e := range s.events.Recent(events.DefaultHistory, func(e events.Event) bool { return events.Visible(p.Tenant, e) }) {
		if strconv.FormatUint(e.ID, 10) == id {
			service.WriteJSON(w, http.StatusOK, eventEntryBody(e))
			return nil
		}
	}
	return rf.NotFound("LogEntry", id)
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
		"MessageArgs": service.NonNil(e.Args),
	}
	if e.Origin != "" {
		entry["Links"] = map[string]any{"OriginOfCondition": rf.Ref(e.Origin)}
	}
	return entry
}
