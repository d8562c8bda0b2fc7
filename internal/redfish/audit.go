package redfish

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"rackpool/internal/redfish/service"
	"rackpool/internal/rf"
	"rackpool/internal/store"
	"rackpool/internal/tenancy"
)

// auditLog is where the audit log is kept (store.Store); package managers
// reads it back.
type auditLog interface {
	AppendAudit(ctx context.Context, e store.AuditEntry) (store.AuditEntry, error)
	Audit(ctx context.Context, q store.AuditQuery) ([]store.AuditEntry, error)
	AuditMatching(ctx context.Context, q store.AuditQuery) (int64, error)
}

// Audit log: every request that could change something (every method but
// GET and HEAD) and every refused request is recorded durably before its
// response leaves: who (account, tenant, remote address), when, what
// (method, path, the route's action) and the outcome (success, failure,
// denied) with the status code and, for errors, the message ID. Request
// bodies are never recorded, so passwords and tokens never reach the log.
// The log is read through Managers/rackpool/LogServices/Audit/Entries
// (package managers; administrators see all entries, a tenant's accounts
// their tenant's)
// and exported with `rackpool audit`.

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

// Detail and Routine let a family's handler annotate the entry
// (service.Notes).
func (a *auditInfo) Detail(detail string) { a.detail = detail }
func (a *auditInfo) Routine()             { a.routine = true }

var _ service.Notes = (*auditInfo)(nil)

// auditOf returns the audit notes ctx carries (admit puts them there).
func auditOf(ctx context.Context) (*auditInfo, bool) {
	n, _ := service.NotesOf(ctx)
	a, ok := n.(*auditInfo)
	return a, ok
}

// noteAudit lets a handler annotate its request's audit entry.
func noteAudit(r *http.Request) *auditInfo {
	if a, ok := auditOf(r.Context()); ok {
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
	info, ok := auditOf(r.Context())
	if !ok || info.async || s.store == nil {
		return r.Context()
	}
	p := principal(r)
	info.pending = store.NewPendingAudit(store.AuditEntry{User: p.User, Tenant: p.Tenant, Remote: r.RemoteAddr,
		Method: r.Method, Target: r.URL.Path, Action: info.action, Outcome: store.AuditSuccess, Status: status,
		MessageID: successMessage(r, status)})
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

// successMessage is the Base registry message a successful request's
// audit entry carries: what the service did, in the words DMTF gave it.
func successMessage(r *http.Request, status int) string {
	switch {
	case status == http.StatusCreated:
		return baseRegistry + "Created"
	case strings.HasPrefix(r.URL.Path, "/redfish/v1/AccountService/Accounts/") && r.Method == http.MethodDelete:
		return baseRegistry + "AccountRemoved"
	case strings.HasPrefix(r.URL.Path, "/redfish/v1/AccountService/Accounts/") && r.Method == http.MethodPatch:
		return baseRegistry + "AccountModified"
	case strings.HasPrefix(r.URL.Path, rf.SessionsPath+"/") && r.Method == http.MethodDelete:
		return baseRegistry + "SessionTerminated"
	}
	return baseRegistry + "Success"
}

// auditRequest records a finished request; fault is the error it was
// answered with (nil on success), whose MessageId the entry carries. Only
// the MessageId: an error's message can quote what the client sent.
func (s *Server) auditRequest(r *http.Request, p tenancy.Principal, action string, status int, info *auditInfo, fault *apiError) {
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
	if status == http.StatusAccepted && detail == "" {
		detail = "accepted as a task"
	}
	var msg string
	switch {
	case fault != nil:
		msg = fault.id
	case status < 400:
		msg = successMessage(r, status)
	default: // refused before a handler ran, without an *apiError
		msg = baseRegistry + "GeneralError"
	}
	s.audit(r.Context(), store.AuditEntry{User: user, Tenant: p.Tenant, Remote: r.RemoteAddr, Method: r.Method,
		Target: r.URL.Path, Action: action, Outcome: outcome, Status: status, Detail: detail, MessageID: msg})
	if outcome == store.AuditDenied {
		s.metrics.refusals.With(strconv.Itoa(status)).Inc()
	}
}
