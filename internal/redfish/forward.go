package redfish

import (
	"net/http"
	"net/url"
	"strings"
)

// Forwarding is what the active replicas' forwarding (replica.Forward) and
// 503 gate (replica.Gate) know of the service (docs/ha.md): the resources
// the leader alone serves, the replica a task's ID names, the service
// root, and the Redfish errors they answer themselves. Its zero value is
// ready.
type Forwarding struct{}

const hostAgentsPath = "/redfish/v1/Oem/Rackpool/HostAgents"

// leaderPaths are the resources the leader alone serves: the subsystems
// whose state lives in one process (memory leases and memory nodes,
// blocknodes and drives, usage telemetry, predictive provisioning).
var leaderPaths = []string{
	"/redfish/v1/Oem/Rackpool/MemoryNodes",
	"/redfish/v1/Oem/Rackpool/MemoryLeases",
	"/redfish/v1/Oem/Rackpool/BlockNodes",
	"/redfish/v1/Oem/Rackpool/Drives",
	"/redfish/v1/Oem/Rackpool/Provisioning",
	"/redfish/v1/TelemetryService",
	// Push subscriptions: the leader delivers them (its bus carries every
	// replica's events, through the event log), so that one replica
	// delivers each event once.
	"/redfish/v1/EventService/Subscriptions",
	"/redfish/v1/EventService/Actions/EventService.SubmitTestEvent",
}

// LeaderOwned reports whether the leader alone serves path.
func (Forwarding) LeaderOwned(path string) bool {
	for _, p := range leaderPaths {
		if path == p || strings.HasPrefix(path, p+"/") {
			return true
		}
	}
	return strings.HasPrefix(path, "/redfish/v1/Systems/") && strings.HasSuffix(path, "/Actions/Oem/Rackpool.SubmitUsage")
}

// TaskTag returns the tag of the replica a task path names (its ID begins
// with the tag and a dash, Options.TaskPrefix), "" if the path is no
// task's or its ID has none.
func (Forwarding) TaskTag(path string) string {
	for _, p := range []string{tasksPath, monitorsPath} {
		if id, ok := strings.CutPrefix(path, p); ok && !strings.Contains(id, "/") {
			if tag, _, ok := strings.Cut(id, "-"); ok {
				return tag
			}
		}
	}
	return ""
}

// StepsHost returns the host of a host agent's steps path (its poll,
// GET .../HostAgents/{host}/Steps, or its answer, POST
// .../Steps/{step}/Actions/Oem/Rackpool.Complete), "" for any other path.
func (Forwarding) StepsHost(path string) string {
	rest, ok := strings.CutPrefix(path, hostAgentsPath+"/")
	if !ok {
		return ""
	}
	host, steps, ok := strings.Cut(rest, "/")
	if !ok || host == "" || (steps != "Steps" && !strings.HasPrefix(steps, "Steps/")) {
		return ""
	}
	if h, err := url.PathUnescape(host); err == nil {
		return h
	}
	return ""
}

// Root reports whether path is the service root (/redfish, /redfish/v1).
func (Forwarding) Root(path string) bool {
	p := strings.TrimSuffix(path, "/")
	return p == "/redfish/v1" || p == "/redfish"
}

// Unavailable answers 503 ServiceTemporarilyUnavailable with Retry-After
// 1, saying why in its resolution.
func (Forwarding) Unavailable(w http.ResponseWriter, why string) {
	writeError(w, newError(http.StatusServiceUnavailable, baseRegistry+"ServiceTemporarilyUnavailable",
		"The service is temporarily unavailable.  Retry in 1 seconds.", "1").withResolution(why+" Retry shortly."))
}

// TaskGone answers 404 ResourceMissingAtURI for the task at path, whose
// replica has stopped.
func (Forwarding) TaskGone(w http.ResponseWriter, path string) {
	writeError(w, newError(http.StatusNotFound, baseRegistry+"ResourceMissingAtURI",
		"The resource at the URI '"+path+"' was not found.", path).
		withResolution("The replica that ran this task has stopped, and its tasks with it. Read the resource the task changed to know its outcome."))
}
