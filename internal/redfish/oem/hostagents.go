package oem

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"rackpool/api"
	"rackpool/internal/compose"
	"rackpool/internal/hostagent"
	"rackpool/internal/inventory"
	"rackpool/internal/redfish/service"
	"rackpool/internal/rf"
	"rackpool/internal/tenancy"
)

// HostSteps hands the composition saga's host steps to host agents
// (hostagent.Broker).
type HostSteps interface {
	Poll(ctx context.Context, host string, wait time.Duration) []compose.HostStep
	Complete(host, id string, failure error) error
}

// HostAgents serves the host agents' routes.
type HostAgents struct {
	broker HostSteps // nil: no host agents
	top    Hosts
	log    *slog.Logger
}

// Hosts finds hosts and blocks (topology.Topology).
type Hosts interface {
	Host(id string) *inventory.Host
	Block(id string) *inventory.Block
}

// NewHostAgents returns the host agents' service: broker hands out the
// steps (nil: none, every route answers 404), top names the hosts and
// blocks.
func NewHostAgents(broker HostSteps, top Hosts, log *slog.Logger) *HostAgents {
	return &HostAgents{broker: broker, top: top, log: log}
}

// HostAgentRoutes are the host agents' (OEM): each agent, with its own
// HostAgent account bound to its host, long-polls its host's saga steps
// and answers them (docs/southbound.md; the core's routes.go gathers them). No other account may call them,
// and an agent sees only its own host.
var HostAgentRoutes = []service.Route[*HostAgents]{
	{Pattern: "GET /redfish/v1/Oem/Rackpool/HostAgents/{host}/Steps", Priv: service.HostAgent, Handler: (*HostAgents).getHostSteps},
	{Pattern: "POST /redfish/v1/Oem/Rackpool/HostAgents/{host}/Steps/{step}/Actions/Oem/Rackpool.Complete", Priv: service.HostAgent, Handler: (*HostAgents).completeHostStep},
}

// maxHostPoll bounds one long poll.
const maxHostPoll = 30 * time.Second

// agentHost returns the path's host when r's principal is that host's
// agent; any other host is not found, so host names do not leak.
func (s *HostAgents) agentHost(r *http.Request) (string, error) {
	host := r.PathValue("host")
	p := service.Principal(r)
	if s.broker == nil || p.Role != tenancy.RoleHostAgent || p.Host != host || s.top.Host(host) == nil {
		return "", rf.NotFound("HostAgent", host)
	}
	return host, nil
}

func (s *HostAgents) getHostSteps(w http.ResponseWriter, r *http.Request) error {
	host, err := s.agentHost(r)
	if err != nil {
		return err
	}
	wait := time.Duration(0)
	if v := r.URL.Query().Get("wait"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return service.ErrQueryValue("wait", v)
		}
		wait = min(time.Duration(n)*time.Second, maxHostPoll)
	}
	steps := s.broker.Poll(r.Context(), host, wait)
	out := make([]api.HostStep, 0, len(steps))
	for _, st := range steps {
		out = append(out, api.HostStep{ID: st.ID, Composition: st.Composition, Host: st.Host, Op: st.Op,
			Devices: s.hostDevices(st.Blocks), Have: s.hostDevices(st.Have), Deadline: st.Deadline.UTC()})
	}
	service.WriteJSON(w, http.StatusOK, map[string]any{"Members": out})
	return nil
}

// hostDevices describes blocks as an agent looks for them on its host.
func (s *HostAgents) hostDevices(blocks []string) []api.HostDevice {
	out := make([]api.HostDevice, 0, len(blocks))
	for _, id := range blocks {
		b := s.top.Block(id)
		if b == nil || b.Device == nil {
			continue
		}
		d := b.Device
		serial := d.Attrs["serial"]
		if serial == "" {
			serial = d.Attrs["wwn"]
		}
		out = append(out, api.HostDevice{Block: b.ID, Device: d.ID, Kind: string(b.Kind), Fabric: string(d.Fabric.Kind),
			VendorID: d.VendorID, DeviceID: d.DeviceID, Serial: serial, Bytes: b.CapacityBytes})
	}
	return out
}

func (s *HostAgents) completeHostStep(w http.ResponseWriter, r *http.Request) error {
	host, err := s.agentHost(r)
	if err != nil {
		return err
	}
	var body struct {
		Success *bool
		Message string
	}
	if err := rf.Decode(r, &body, rf.MaxBody); err != nil {
		return err
	}
	if body.Success == nil {
		return rf.PropertyMissing("Success")
	}
	var failure error
	if !*body.Success {
		msg := body.Message
		if msg == "" {
			msg = "no reason given"
		}
		failure = errors.New(msg)
	}
	id := r.PathValue("step")
	if err := s.broker.Complete(host, id, failure); err != nil {
		if errors.Is(err, hostagent.ErrUnknownStep) {
			return rf.NotFound("HostStep", id).Resolve("The step is no longer pending: it finished, or the control plane gave up on it and rolled its composition back.")
		}
		return err
	}
	s.log.Info("host step answered", "host", host, "step", id, "success", *body.Success, "message", body.Message)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// Ensure the broker satisfies the saga's hook.
var _ compose.Host = (*hostagent.Broker)(nil)
