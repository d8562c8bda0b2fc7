package redfish_test

import (
	"context"
	"encoding/pem"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	"rackpool/internal/events"
	"rackpool/internal/redfish"
	"rackpool/internal/replica"
	"rackpool/internal/store/postgres"
	"rackpool/internal/store/postgres/pgtest"
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

// TestMetricsOfEveryReplica: an active replica's /metrics has every
// replica's series, each labelled with its replica's tag: its own, and
// the others' own (?local) read with the client's credentials. The usage
// series come from the leader alone, whichever replica is asked, and only
// for an account without a tenant. ?local answers a replica's own series.
// A replica that cannot be read makes /metrics 503, never a partial
// exposition.
func TestMetricsOfEveryReplica(t *testing.T) {
	leader := newServiceAgents(t, topology.LoadDefault(), nil, func(o *redfish.Options) {
		o.TaskPrefix, o.Replica, o.Leads = "bbbb-", "bbbb", func() bool { return true }
	})
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leader.srv.Certificate().Raw})
	peers := &peerList{peers: []replica.Peer{{URL: leader.srv.URL, CA: ca}}}
	s := newServiceAgents(t, topology.LoadDefault(), nil, func(o *redfish.Options) {
		o.TaskPrefix, o.Replica, o.Leads = "aaaa-", "aaaa", func() bool { return false }
		o.Gather = replica.NewGatherer("aaaa", peers).Get
	})
	leader.compose(specificBody("host2", "gpu5"))

	all := string(s.must(http.StatusOK, "GET", "/metrics", nil, admin).body)
	for _, want := range []string{
		`rackpool_compose_duration_seconds_count{outcome="ok",replica="bbbb"} 1`,
		`rackpool_compositions{replica="bbbb",state="Composed"} 1`,
		`rackpool_compositions{replica="aaaa",state="Composed"} 0`,
		`rackpool_usage_series{replica="bbbb"}`,
	} {
		if !strings.Contains(all, want) {
			t.Errorf("no %s in /metrics of the replica that does not lead:\n%s", want, all)
		}
	}
	if strings.Contains(all, `rackpool_usage_series{replica="aaaa"}`) || strings.Count(all, "# TYPE rackpool_compositions gauge") != 1 {
		t.Errorf("usage series from a replica that does not lead, or a family twice:\n%s", all)
	}
	// A leader that reads this replica has its own usage series and none
	// of this replica's.
	peers2 := &peerList{peers: []replica.Peer{{URL: s.srv.URL, CA: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.srv.Certificate().Raw})}}}
	lead := newServiceAgents(t, topology.LoadDefault(), nil, func(o *redfish.Options) {
		o.TaskPrefix, o.Replica, o.Leads = "cccc-", "cccc", func() bool { return true }
		o.Gather = replica.NewGatherer("cccc", peers2).Get
	})
	if got := string(lead.must(http.StatusOK, "GET", "/metrics", nil, admin).body); !strings.Contains(got, `rackpool_usage_series{replica="cccc"}`) ||
		!strings.Contains(got, `rackpool_compositions{replica="aaaa",state="Composed"} 0`) || strings.Contains(got, `rackpool_usage_series{replica="aaaa"}`) {
		t.Errorf("/metrics of a leader:\n%s", got)
	}

	local := string(s.must(http.StatusOK, "GET", "/metrics?local", nil, admin).body)
	if !strings.Contains(local, `rackpool_compositions{replica="aaaa",state="Composed"} 0`) || strings.Contains(local, `replica="bbbb"`) {
		t.Errorf("?local:\n%s", local)
	}

	// A tenant's account reads every replica's series but no usage.
	blue, _, _ := s.tenants()
	leader.tenants()
	scoped := string(s.must(http.StatusOK, "GET", "/metrics", nil, blue).body)
	if !strings.Contains(scoped, `rackpool_compositions{replica="bbbb",state="Composed"} 1`) || strings.Contains(scoped, "rackpool_usage") {
		t.Errorf("/metrics for a tenant's account:\n%s", scoped)
	}

	peers.err = errors.New("connection refused")
	r := s.must(http.StatusServiceUnavailable, "GET", "/metrics", nil, admin)
	if r.header.Get("Retry-After") == "" || r.errorCode(t) != "Base.1.22.ServiceTemporarilyUnavailable" {
		t.Fatalf("unreachable replica: %s %s", r.header, r.body)
	}
	s.must(http.StatusOK, "GET", "/metrics?local", nil, admin)
}

// replicaService is a service whose events go through the event log of
// the PostgreSQL database at url as the active replica tagged tag (its
// compositions and accounts stay in its own store).
func replicaService(t *testing.T, url, tag string) *service {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	st, err := postgres.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	elog, err := replica.OpenEventLog(ctx, st, tag, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := newServiceBus(t, topology.LoadDefault(), nil, elog.BusOptions(events.Options{}), func(o *redfish.Options) {
		o.TaskPrefix, o.Replica = tag+"-", tag
	})
	go elog.Run(ctx, s.bus)
	t.Cleanup(func() { cancel(); elog.Close() })
	return s
}

// TestEventsOfEveryReplica: two active replicas' SSE streams carry every
// event either publishes, under the same EventId: a system composed at
// one is announced at the other, a tenant's stream at the other carries
// its tenant's events and not the rest, and a test event submitted at
// the other reaches the first.
func TestEventsOfEveryReplica(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL")
	}
	pg := pgtest.Start(t)
	url := pg.CreateDatabase(t, pgtest.DatabaseName(t))
	a, b := replicaService(t, url, "aaaa"), replicaService(t, url, "bbbb")
	blueA, _, _ := a.tenants()
	blueB, _, _ := b.tenants()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	atA, atB, blueAtB := a.openSSE(ctx, "", admin, ""), b.openSSE(ctx, "", admin, ""), b.openSSE(ctx, "", blueB, "")

	sys := a.compose(specificBody("host1", "gpu1"))
	created := `"MessageId":"ResourceEvent.1.4.ResourceCreated"`
	mA, mB := next(t, atA, `"Composition":"`+sys+`"`, nil), next(t, atB, `"Composition":"`+sys+`"`, nil)
	if mA.id != mB.id || mA.data != mB.data || !strings.Contains(mB.data, created) || !strings.Contains(mB.data, `"EventId":"`+mB.id+`"`) {
		t.Fatalf("a's compose at a: %+v\nat b: %+v", mA, mB)
	}

	r := a.must(http.StatusCreated, "POST", "/redfish/v1/Systems", specificBody("host2", "gpu5"), blueA)
	blueSys, _ := r.json(t)["Id"].(string)
	var skipped []sseMessage
	m := next(t, blueAtB, `"Composition":"`+blueSys+`"`, &skipped)
	if !strings.Contains(m.data, created) {
		t.Errorf("blue's system at b: %+v", m)
	}
	for _, o := range skipped {
		if strings.Contains(o.data, sys) {
			t.Errorf("blue's stream at b carries the Administrator's system: %+v", o)
		}
	}
	if mb := next(t, atB, `"Composition":"`+blueSys+`"`, nil); mb.id != m.id {
		t.Errorf("blue's system under two IDs at b: %s and %s", mb.id, m.id)
	}

	b.must(http.StatusNoContent, "POST", "/redfish/v1/EventService/Actions/EventService.SubmitTestEvent", map[string]any{"Message": "from b"}, admin)
	if fromB, atB := next(t, atA, "from b", nil), next(t, atB, "from b", nil); fromB.id != atB.id {
		t.Errorf("b's test event: %s at a, %s at b", fromB.id, atB.id)
	}
}
