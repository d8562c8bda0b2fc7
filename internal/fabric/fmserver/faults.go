package fmserver

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"

	"rackpool/internal/fabric"
	"rackpool/internal/rf"
)

// faultRoutes are the fault-injection actions of the Fabric. They are
// never subject to transport faults.
var faultRoutes = []route{
	{"POST /redfish/v1/Fabrics/{id}/Actions/Oem/Rackpool.InjectFault", login, (*Server).injectFault},
	{"POST /redfish/v1/Fabrics/{id}/Actions/Oem/Rackpool.ClearFaults", login, (*Server).clearFaults},
	{"POST /redfish/v1/Fabrics/{id}/Actions/Oem/Rackpool.InjectTransportFault", login, (*Server).injectTransportFault},
}

// Transport fault kinds (InjectTransportFault).
const (
	// Unavailable answers the next Count requests 503 with Retry-After.
	Unavailable = "unavailable"
	// LoseResponse processes the next Count POST, PATCH and DELETE
	// requests on zones and connections as usual and then closes their
	// connection without an answer.
	LoseResponse = "lose-response"
	// Restart forgets every session and task monitor now, as a manager's
	// restart would; the hardware state stays and a change in flight
	// finishes. Count is ignored.
	Restart = "restart"
)

// Chaos rates (Options.Chaos): every request but the fault-injection
// actions starts, with chaosBurst probability, a burst of 1 to
// chaosMaxBurst 503 answers (itself included); every POST, PATCH and
// DELETE on zones and connections loses its answer with chaosLose
// probability and is followed by a restart with chaosRestart probability.
const (
	chaosBurst    = 0.10
	chaosMaxBurst = 3
	chaosLose     = 0.05
	chaosRestart  = 0.04
)

// transportFaults is the armed transport faults and the chaos generator.
type transportFaults struct {
	mu          sync.Mutex
	unavailable int // requests left to answer 503
	lose        int // changes left whose answer is lost
	rng         *rand.Rand
}

func (t *transportFaults) init(seed int64) {
	if seed != 0 {
		t.rng = rand.New(rand.NewPCG(uint64(seed), 0x5eed_f00d))
	}
}

// InjectTransportFault arms a transport fault: kind Unavailable,
// LoseResponse or Restart (see their documentation). Count 0 means 1.
func (s *Server) InjectTransportFault(kind string, count int) error {
	if count < 0 {
		return fmt.Errorf("transport fault %s: negative count %d", kind, count)
	}
	count = max(count, 1)
	switch kind {
	case Unavailable:
		s.faults.mu.Lock()
		s.faults.unavailable += count
		s.faults.mu.Unlock()
	case LoseResponse:
		s.faults.mu.Lock()
		s.faults.lose += count
		s.faults.mu.Unlock()
	case Restart:
		s.restart()
	default:
		return fmt.Errorf("transport fault kind %q: want %s, %s or %s", kind, Unavailable, LoseResponse, Restart)
	}
	s.log.Warn("transport fault injected", "kind", kind, "count", count)
	return nil
}

// restart forgets every session and task monitor.
func (s *Server) restart() {
	s.sessions.reset()
	s.tasks.Reset()
	s.log.Warn("emulated fabric manager restart: sessions and task monitors forgotten")
}

func (t *transportFaults) clear() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.unavailable, t.lose = 0, 0
}

// isFaultAction reports whether r is one of the fault-injection actions.
func isFaultAction(r *http.Request) bool {
	return strings.Contains(r.URL.Path, "/Actions/Oem/Rackpool.")
}

// isChange reports whether r changes a zone or a connection.
func isChange(r *http.Request) bool {
	switch r.Method {
	case http.MethodPost, http.MethodPatch, http.MethodDelete:
	default:
		return false
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/redfish/v1/Fabrics/")
	if !ok {
		return false
	}
	parts := strings.Split(rest, "/")
	return len(parts) >= 2 && (parts[1] == "Zones" || parts[1] == "Connections")
}

// unavailableNow decides whether r is answered 503.
func (t *transportFaults) unavailableNow() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.unavailable == 0 && t.rng != nil && t.rng.Float64() < chaosBurst {
		t.unavailable = 1 + t.rng.IntN(chaosMaxBurst)
	}
	if t.unavailable > 0 {
		t.unavailable--
		return true
	}
	return false
}

// loseNow decides whether a change's answer is lost — forced (an injected
// lose-response: whatever the answer) or by chance (chaos: only the answer
// of a change that was made, so that a refusal, an injected attach failure
// included, is always heard and counted once) — and whether a restart
// follows it.
func (t *transportFaults) loseNow() (forced, chance, restart bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.lose > 0 {
		t.lose--
		forced = true
	}
	if t.rng != nil {
		chance = t.rng.Float64() < chaosLose
		restart = t.rng.Float64() < chaosRestart
	}
	return forced, chance, restart
}

// serveWithFaults applies the transport faults to r, served by next.
func (s *Server) serveWithFaults(w http.ResponseWriter, r *http.Request, next http.HandlerFunc) {
	if isFaultAction(r) {
		next(w, r)
		return
	}
	if s.faults.unavailableNow() {
		writeError(w, errUnavailable(1))
		return
	}
	if !isChange(r) {
		next(w, r)
		return
	}
	forced, chance, restart := s.faults.loseNow()
	if restart {
		defer s.restart()
	}
	if !forced && !chance {
		next(w, r)
		return
	}
	rec := &rf.Recorder{}
	next(rec, r)
	if !forced && rec.Status/100 != 2 {
		rec.Replay(w)
		return
	}
	s.log.Warn("transport fault: answer lost", "method", r.Method, "path", r.URL.Path, "status", rec.Status)
	if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
		_ = conn.Close()
		return
	}
	panic(http.ErrAbortHandler)
}

func (s *Server) injectFault(w http.ResponseWriter, r *http.Request) error {
	if err := s.checkFabric(r); err != nil {
		return err
	}
	var body struct {
		Kind   *string
		Target string
		Count  int
	}
	if err := decode(r, &body); err != nil {
		return err
	}
	if body.Kind == nil {
		return errPropertyMissing("Kind")
	}
	switch fabric.FaultKind(*body.Kind) {
	case fabric.AttachFails, fabric.DeviceFails, fabric.PortFails, fabric.HostFails, fabric.ReleaseStalls:
	default:
		return errPropertyValue("Kind", *body.Kind, "Use attach-fails, device-fails, port-fails, host-fails or (cxl-memory fabrics) release-stalls.")
	}
	if body.Count < 0 {
		return errPropertyValue("Count", fmt.Sprint(body.Count), "Use a count of 0 or more.")
	}
	fi, ok := s.drv.(fabric.FaultInjector)
	if !ok {
		return newError(http.StatusBadRequest, baseRegistry+"ActionNotSupported",
			"The action Rackpool.InjectFault is not supported by the resource.", "Rackpool.InjectFault")
	}
	if err := fi.InjectFault(fabric.Fault{Kind: fabric.FaultKind(*body.Kind), Target: body.Target, Count: body.Count}); err != nil {
		return errPropertyValue("Target", body.Target, err.Error())
	}
	s.log.Warn("fault injected", "fabric", s.fab.ID, "kind", *body.Kind, "target", body.Target, "count", body.Count)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) clearFaults(w http.ResponseWriter, r *http.Request) error {
	if err := s.checkFabric(r); err != nil {
		return err
	}
	if err := decodeOptional(r); err != nil {
		return err
	}
	if fi, ok := s.drv.(fabric.FaultInjector); ok {
		fi.ClearFaults()
	}
	s.faults.clear()
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) injectTransportFault(w http.ResponseWriter, r *http.Request) error {
	if err := s.checkFabric(r); err != nil {
		return err
	}
	var body struct {
		Kind  *string
		Count int
	}
	if err := decode(r, &body); err != nil {
		return err
	}
	if body.Kind == nil {
		return errPropertyMissing("Kind")
	}
	if body.Count < 0 {
		return errPropertyValue("Count", fmt.Sprint(body.Count), "Use a count of 0 or more.")
	}
	if err := s.InjectTransportFault(*body.Kind, body.Count); err != nil {
		return errPropertyValue("Kind", *body.Kind, "Use unavailable, lose-response or restart.")
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
