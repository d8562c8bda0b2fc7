package fmserver

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"time"

	"rackpool/internal/rf"
)

// sessionRoutes are the routes of the SessionService.
var sessionRoutes = []route{
	{"GET /redfish/v1/SessionService", login, (*Server).getSessionService},
	{"GET /redfish/v1/SessionService/Sessions", login, (*Server).getSessions},
	{"POST /redfish/v1/SessionService/Sessions", public, (*Server).postSession},
	{"GET /redfish/v1/SessionService/Sessions/{id}", login, (*Server).getSession},
	{"DELETE /redfish/v1/SessionService/Sessions/{id}", login, (*Server).deleteSession},
}

// Sessions live in memory: a "restart" transport fault forgets them, as a
// real manager's restart would. A session ends after the timeout of
// inactivity on the server's clock.

type session struct {
	id       string
	token    string
	user     string
	created  time.Time
	lastUsed time.Time
}

type sessionTable struct {
	mu      sync.Mutex
	timeout time.Duration
	seq     int
	byToken map[string]*session
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (t *sessionTable) create(user string, now time.Time) *session {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.seq++
	sess := &session{id: strconv.Itoa(t.seq) + "-" + randomHex(4), token: randomHex(24), user: user, created: now, lastUsed: now}
	t.byToken[sess.token] = sess
	return sess
}

// touch returns the session of token and marks it used, or false when
// there is none or it expired (then it is removed).
func (t *sessionTable) touch(token string, now time.Time) (*session, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	sess := t.byToken[token]
	if sess == nil {
		return nil, false
	}
	if now.Sub(sess.lastUsed) > t.timeout {
		delete(t.byToken, token)
		return nil, false
	}
	sess.lastUsed = now
	return sess, true
}

// list returns the live sessions by ID, dropping expired ones.
func (t *sessionTable) list(now time.Time) []session {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []session
	for tok, sess := range t.byToken {
		if now.Sub(sess.lastUsed) > t.timeout {
			delete(t.byToken, tok)
			continue
		}
		out = append(out, *sess)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].created.Before(out[j].created) || out[i].id < out[j].id })
	return out
}

func (t *sessionTable) remove(id string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for tok, sess := range t.byToken {
		if sess.id == id {
			delete(t.byToken, tok)
			return true
		}
	}
	return false
}

// reset forgets every session (a restart).
func (t *sessionTable) reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.byToken = map[string]*session{}
}

func (s *Server) getSessionService(w http.ResponseWriter, r *http.Request) error {
	rf.WriteJSON(w, http.StatusOK, map[string]any{
		"@odata.id":      "/redfish/v1/SessionService",
		"@odata.type":    "#SessionService.v1_1_8.SessionService",
		"Id":             "SessionService",
		"Name":           "Session Service",
		"ServiceEnabled": true,
		"SessionTimeout": int(s.sessions.timeout.Seconds()),
		"Status":         statusOK(""),
		"Sessions":       ref("/redfish/v1/SessionService/Sessions"),
	})
	return nil
}

func (s *Server) getSessions(w http.ResponseWriter, r *http.Request) error {
	var members []odataID
	for _, sess := range s.sessions.list(s.clk.Now()) {
		members = append(members, ref("/redfish/v1/SessionService/Sessions/"+sess.id))
	}
	rf.WriteJSON(w, http.StatusOK, collection("/redfish/v1/SessionService/Sessions", "SessionCollection", "Session Collection", members))
	return nil
}

func sessionBody(sess session) map[string]any {
	return map[string]any{
		"@odata.id":   "/redfish/v1/SessionService/Sessions/" + sess.id,
		"@odata.type": "#Session.v1_7_0.Session",
		"Id":          sess.id,
		"Name":        "User Session",
		"UserName":    sess.user,
		"CreatedTime": sess.created.UTC().Format(time.RFC3339),
	}
}

func (s *Server) postSession(w http.ResponseWriter, r *http.Request) error {
	user, password, err := rf.DecodeLogin(r, rf.MaxBody)
	if err != nil {
		return err
	}
	if !s.credentialsOK(user, password) {
		s.log.Warn("login failed", "user", user, "remote", r.RemoteAddr)
		return errNoSession()
	}
	sess := s.sessions.create(user, s.clk.Now())
	w.Header().Set("X-Auth-Token", sess.token)
	w.Header().Set("Location", "/redfish/v1/SessionService/Sessions/"+sess.id)
	rf.WriteJSON(w, http.StatusCreated, sessionBody(*sess))
	return nil
}

func (s *Server) getSession(w http.ResponseWriter, r *http.Request) error {
	for _, sess := range s.sessions.list(s.clk.Now()) {
		if sess.id == r.PathValue("id") {
			rf.WriteJSON(w, http.StatusOK, sessionBody(sess))
			return nil
		}
	}
	return errNotFound("Session", r.PathValue("id"))
}

func (s *Server) deleteSession(w http.ResponseWriter, r *http.Request) error {
	if !s.sessions.remove(r.PathValue("id")) {
		return errNotFound("Session", r.PathValue("id"))
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
