package redfish

import (
	"context"
	"errors"
	"net/http"
	"time"

	"rackpool/internal/rf"
	"rackpool/internal/tenancy"
)

// The SessionService: login (a session and its X-Auth-Token, over HTTPS
// only), the sessions an account may see, logout. Accounts and sessions
// are tenancy's; authentication of each request is the request wrapper's
// (server.go).

// sessionService is what the SessionService's handlers need of the
// accounts (tenancy.Service).
type sessionService interface {
	Login(ctx context.Context, user, password, source string) (tenancy.Session, string, error)
	Logout(ctx context.Context, id string) error
	Session(ctx context.Context, id string) (tenancy.Session, bool)
	Sessions(ctx context.Context) []tenancy.Session
	ActiveSessions(ctx context.Context) int
	IdleTimeout() time.Duration
}

// sessionRoutes are the routes of the SessionService (routes.go).
var sessionRoutes = []route{
	{"GET /redfish/v1/SessionService", login, (*Server).getSessionService},
	{"GET /redfish/v1/SessionService/Sessions", login, (*Server).getSessions},
	{"POST /redfish/v1/SessionService/Sessions", public, (*Server).postSession},
	{"GET /redfish/v1/SessionService/Sessions/{id}", login, (*Server).getSession},
	{"DELETE /redfish/v1/SessionService/Sessions/{id}", login, (*Server).deleteSession},
}

func (s *Server) getSessionService(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, map[string]any{
		"@odata.id":      "/redfish/v1/SessionService",
		"@odata.type":    "#SessionService.v1_1_8.SessionService",
		"Id":             "SessionService",
		"Name":           "Session Service",
		"ServiceEnabled": true,
		"SessionTimeout": int(s.auth.IdleTimeout().Seconds()),
		"Sessions":       ref("/redfish/v1/SessionService/Sessions"),
	})
	return nil
}

func (s *Server) getSessions(w http.ResponseWriter, r *http.Request) error {
	p := principal(r)
	var members []odataID
	for _, sess := range s.auth.Sessions(r.Context()) {
		if p.Has(tenancy.ConfigureUsers) || sess.User == p.User {
			members = append(members, reff("/redfish/v1/SessionService/Sessions/%s", sess.ID))
		}
	}
	writeJSON(w, http.StatusOK, collection("/redfish/v1/SessionService/Sessions", "SessionCollection", "Session Collection", members))
	return nil
}

func sessionBody(sess tenancy.Session) map[string]any {
	return map[string]any{
		"@odata.id":   "/redfish/v1/SessionService/Sessions/" + sess.ID,
		"@odata.type": "#Session.v1_7_0.Session",
		"Id":          sess.ID,
		"Name":        "User Session",
		"UserName":    sess.User,
		"CreatedTime": sess.Created.UTC().Format("2006-01-02T15:04:05Z"),
	}
}

func (s *Server) postSession(w http.ResponseWriter, r *http.Request) error {
	if r.TLS == nil {
		s.denied(r, tenancy.Principal{}, "session creation over plain HTTP")
		return errInsecure(r.URL.Path)
	}
	user, password, err := rf.DecodeLogin(r, MaxBody)
	if err != nil {
		return err
	}
	noteAudit(r).user = user
	sess, token, err := s.auth.Login(r.Context(), user, password, clientAddr(r))
	if errors.Is(err, tenancy.ErrNoAccount) || errors.Is(err, tenancy.ErrLocked) {
		s.denied(r, tenancy.Principal{User: user}, "login failed: "+err.Error())
		e := errNoSession()
		e.noBasic = sessionClient(r)
		return e
	}
	if err != nil {
		return err
	}
	w.Header().Set("X-Auth-Token", token)
	w.Header().Set("Location", "/redfish/v1/SessionService/Sessions/"+sess.ID)
	writeJSON(w, http.StatusCreated, sessionBody(sess))
	return nil
}

func (s *Server) getSession(w http.ResponseWriter, r *http.Request) error {
	sess, ok := s.auth.Session(r.Context(), r.PathValue("id"))
	if p := principal(r); !ok || (!p.Has(tenancy.ConfigureUsers) && sess.User != p.User) {
		return errNotFound("Session", r.PathValue("id"))
	}
	writeJSON(w, http.StatusOK, sessionBody(sess))
	return nil
}

func (s *Server) deleteSession(w http.ResponseWriter, r *http.Request) error {
	if sess, ok := s.auth.Session(r.Context(), r.PathValue("id")); ok && !principal(r).Has(tenancy.ConfigureUsers) && sess.User != principal(r).User {
		return errNotFound("Session", r.PathValue("id"))
	}
	if err := s.auth.Logout(r.Context(), r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
