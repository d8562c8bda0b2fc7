package redfish_test

import (
	"context"
	"encoding/pem"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	"rackpool/internal/redfish"
	"rackpool/internal/replica"
	"rackpool/internal/topology"
)

// peerList is the other replicas a Gatherer reads, or an error.
type peerList struct {
	peers []replica.Peer
	err   error
}

func (l *peerList) Others(context.Context) ([]replica.Peer, error) { return l.peers, l.err }

// TestTasksOfEveryReplica: an active replica's task collection lists its
// own tasks and every other replica's, read with the client's
// credentials over HTTPS (replica.Gatherer); the other replica, asked by
// a forwarded request, lists only its own. A replica that cannot be read
// makes the collection 503, never a partial list.
func TestTasksOfEveryReplica(t *testing.T) {
	other := newService(t)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: other.srv.Certificate().Raw})
	peers := &peerList{peers: []replica.Peer{{URL: other.srv.URL, CA: ca}}}
	s := newServiceAgents(t, topology.LoadDefault(), nil, func(o *redfish.Options) {
		o.TaskPrefix = "aaaa-"
		o.Gather = replica.NewGatherer("aaaa", peers).Get
	})
	async := cred{basic: true, hdr: map[string]string{"Prefer": "respond-async"}}
	s.must(http.StatusAccepted, "POST", "/redfish/v1/Systems", specificBody("host1", "gpu1"), async)
	other.must(http.StatusAccepted, "POST", "/redfish/v1/Systems", specificBody("host2", "gpu5"), async)
	other.must(http.StatusAccepted, "POST", "/redfish/v1/Systems", specificBody("host3", "gpu8"), async)

	own := links(t, other.get("/redfish/v1/TaskService/Tasks")["Members"])
	all := links(t, s.get("/redfish/v1/TaskService/Tasks")["Members"])
	if len(own) != 2 || len(all) != 3 {
		t.Fatalf("the other replica lists %v, this one %v; want 2 and 3", own, all)
	}
	for _, id := range own {
		if !slices.Contains(all, id) {
			t.Errorf("task %s of the other replica is not listed: %v", id, all)
		}
	}
	if !slices.ContainsFunc(all, func(id string) bool { return strings.HasPrefix(id, "aaaa-") }) {
		t.Errorf("this replica's own task is not listed: %v", all)
	}
	// Paged like any collection, over the whole list.
	page := s.get("/redfish/v1/TaskService/Tasks?$top=2")
	if n, _ := page["Members@odata.count"].(float64); n != 3 || len(list(t, page["Members"])) != 2 {
		t.Fatalf("page %v", page)
	}

	peers.err = errors.New("connection refused")
	r := s.must(http.StatusServiceUnavailable, "GET", "/redfish/v1/TaskService/Tasks", nil, admin)
	if r.header.Get("Retry-After") == "" || r.errorCode(t) != "Base.1.22.ServiceTemporarilyUnavailable" {
		t.Fatalf("unreachable replica: %s %s", r.header, r.body)
	}
	peers.err = nil
	peers.peers = append(peers.peers, replica.Peer{URL: "https://127.0.0.1:1", CA: ca})
	s.must(http.StatusServiceUnavailable, "GET", "/redfish/v1/TaskService/Tasks", nil, admin)
}
