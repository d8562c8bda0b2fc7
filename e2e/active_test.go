package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"rackpool/api"
	"rackpool/internal/replica"
)

// replicaTag returns the tag an active replica logged at start-up.
func replicaTag(t *testing.T, s *server) string {
	t.Helper()
	m := regexp.MustCompile(`active replica of the database.* replica=([0-9a-f]+)`).FindStringSubmatch(s.stderr.String())
	if m == nil {
		t.Fatalf("no replica tag in the log:\n%s", s.stderr)
	}
	return m[1]
}

// leads reports whether s has logged that it leads, and not since that it
// lost the lead.
func leads(s *server) bool {
	log := s.stderr.String()
	return strings.LastIndex(log, "active replica leads") > strings.LastIndex(log, "lost the lead")
}

// answeredBy sends a GET of path to s and returns the status and the
// replica that answered.
func answeredBy(t *testing.T, s *server, path, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, s.url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("X-Auth-Token", token)
	} else {
		req.SetBasicAuth("Administrator", password)
	}
	res, err := s.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode, res.Header.Get(replica.ReplicaHeader)
}

// TestPostgresActive: three active replicas of one database and one
// fabric manager. A system composed at one is read and decomposed at
// another; its event reaches the SSE clients of the others under one
// EventId, and /metrics at another has the first one's series (and the
// leader's usage series); a session opened at one is valid at the others, and so is the
// composition policy changed at one; the leader's
// subsystems are answered by the leader whichever replica is asked. A
// replica cut from the database and paused mid-composition is evicted by
// the leader, which settles its half-done composition on the fabric with
// the replica's raised epoch: resumed, the replica's next attach is
// refused and it exits. When the leader is killed, another leads. A
// replica serving alone is refused beside active ones, and --active
// without what it needs is refused at start-up.
func TestPostgresActive(t *testing.T) {
	skipShort(t)
	pg, url := startPostgres(t)
	proxy := startProxy(t, pg.Addr())
	viaProxy := strings.Replace(url, pg.Addr(), proxy.addr(), 1)
	fms := sharedFabrics(t, "real")
	fm := fms[0]
	topo := redfishRack(t, fms...)
	env := append([]string{"RACKPOOL_ADMIN_PASSWORD=" + password}, fmEnv(fms...)...)
	flags := []string{"--active", "--topology", topo}
	a := start(t, t.TempDir(), env, append([]string{"--store", url}, flags...)...)
	waitLog(t, a, "active replica leads", 20*time.Second)
	b := start(t, t.TempDir(), env, append([]string{"--store", viaProxy}, flags...)...)
	c := start(t, t.TempDir(), env, append([]string{"--store", url}, flags...)...)
	tagA, tagB, tagC := replicaTag(t, a), replicaTag(t, b), replicaTag(t, c)
	ctx := context.Background()
	sctx, stopStreams := context.WithCancel(ctx)
	defer stopStreams()
	streamB, streamC := sseStream(t, sctx, b), sseStream(t, sctx, c)

	// A system composed at a is read and decomposed at c.
	sys, err := a.client().Compose(ctx, api.ComposeRequest{Needs: []api.Need{{Kind: "gpu", Count: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	// Its event reaches the SSE clients of b and c, under one EventId
	// (the shared event log), and /metrics at b has a's series.
	created := `"MessageId":"ResourceEvent.1.4.ResourceCreated"`
	atB, atC := awaitEvent(t, streamB, `"Composition":"`+sys.ID+`"`), awaitEvent(t, streamC, `"Composition":"`+sys.ID+`"`)
	if atB != atC || !strings.Contains(atB[1], created) || !strings.Contains(atB[1], `"EventId":"`+atB[0]+`"`) {
		t.Errorf("a's compose at b's SSE client: %q; at c's: %q", atB, atC)
	}
	stopStreams()
	status, metricsAtB := b.request(http.MethodGet, "/metrics", "", true)
	for _, want := range []string{
		`rackpool_compose_duration_seconds_count{outcome="ok",replica="` + tagA + `"} 1`,
		`rackpool_usage_series{replica="` + tagA + `"}`, // a leads: the usage series are its
		`rackpool_compositions{replica="` + tagB + `",state="Composed"}`,
		`rackpool_compositions{replica="` + tagC + `",state="Composed"}`,
	} {
		if status != http.StatusOK || !strings.Contains(metricsAtB, want) {
			t.Errorf("/metrics at b: %d, no %s in\n%s", status, want, metricsAtB)
		}
	}
	if strings.Contains(metricsAtB, `rackpool_usage_series{replica="`+tagB+`"}`) {
		t.Errorf("/metrics at b has the usage series of b, which does not lead:\n%s", metricsAtB)
	}
	if got, err := c.client().System(ctx, sys.ID); err != nil || got.ID != sys.ID {
		t.Fatalf("system %s at another replica: %v, %v", sys.ID, got, err)
	}
	if err := c.client().Decompose(ctx, sys.ID); err != nil {
		t.Fatalf("decompose at another replica: %v", err)
	}
	if _, err := b.client().System(ctx, sys.ID); err == nil {
		t.Errorf("system %s still found at a third replica after its decompose", sys.ID)
	}

	// A task run at a is listed at b and c: every replica lists every
	// replica's tasks (replica.Gatherer).
	req, err := http.NewRequest(http.MethodPost, a.url+"/redfish/v1/Systems", strings.NewReader(
		`{"Links":{"ResourceBlocks":[{"@odata.id":"/redfish/v1/CompositionService/ResourceBlocks/host2"},{"@odata.id":"/redfish/v1/CompositionService/ResourceBlocks/gpu5"}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth("Administrator", password)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Prefer", "respond-async")
	res, err := a.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	monitor := res.Header.Get("Location")
	if res.StatusCode != http.StatusAccepted || !strings.HasPrefix(monitor, "/redfish/v1/TaskService/TaskMonitors/") {
		t.Fatalf("async compose at a: %d, Location %q", res.StatusCode, monitor)
	}
	taskRef := `"/redfish/v1/TaskService/Tasks/` + strings.TrimPrefix(monitor, "/redfish/v1/TaskService/TaskMonitors/") + `"`
	for _, s := range []*server{b, c} {
		if status, body := s.request(http.MethodGet, "/redfish/v1/TaskService/Tasks", "", true); status != http.StatusOK || !strings.Contains(body, taskRef) {
			t.Errorf("a's task %s at another replica: %d %s", taskRef, status, body)
		}
	}
	var asyncSys struct{ Id string }
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		status, body := a.request(http.MethodGet, monitor, "", true)
		if status == http.StatusAccepted && time.Now().Before(deadline) {
			continue
		}
		if err := json.Unmarshal([]byte(body), &asyncSys); err != nil || asyncSys.Id == "" {
			t.Fatalf("a's compose task ended %d %s", status, body)
		}
		break
	}
	if err := a.client().Decompose(ctx, asyncSys.Id); err != nil {
		t.Fatalf("decompose %s: %v", asyncSys.Id, err)
	}

	// A session opened at b is valid at a and c.
	token := login(t, b)
	for _, s := range []*server{a, c} {
		if status, _ := answeredBy(t, s, "/redfish/v1/Systems", token); status != http.StatusOK {
			t.Errorf("b's session at another replica: %d", status)
		}
	}

	// The composition policy changed at c (compose's versioned record)
	// reaches a and b through the change log.
	if status, body := c.request(http.MethodPatch, "/redfish/v1/CompositionService", `{"ReservationDuration": "PT45S"}`, true); status != http.StatusOK {
		t.Fatalf("PATCH CompositionService at c: %d %s", status, body)
	}
	for _, s := range []*server{a, b} {
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			_, body := s.request(http.MethodGet, "/redfish/v1/CompositionService", "", true)
			var svc struct{ ReservationDuration string }
			if json.Unmarshal([]byte(body), &svc) == nil && svc.ReservationDuration == "PT45S" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the policy changed at c never reached %s: %s", replicaTag(t, s), body)
			}
		}
	}

	// The leader (a) answers for its subsystems; each answers for the rest.
	for _, s := range []*server{a, b, c} {
		for _, path := range []string{"/redfish/v1/TelemetryService", "/redfish/v1/EventService/Subscriptions"} {
			if status, by := answeredBy(t, s, path, ""); status != http.StatusOK || by != tagA {
				t.Errorf("%s asked at %s: %d answered by %q, want 200 by the leader %s", path, replicaTag(t, s), status, by, tagA)
			}
		}
	}
	for s, tag := range map[*server]string{a: tagA, b: tagB, c: tagC} {
		if status, by := answeredBy(t, s, "/redfish/v1/Systems", ""); status != http.StatusOK || by != tag {
			t.Errorf("Systems asked at %s: %d answered by %q", tag, status, by)
		}
	}

	// b, cut from the database and paused mid-composition (six devices,
	// 100 ms each on the fabric), is evicted by the leader.
	composed := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		_, err := b.client().Compose(ctx, api.ComposeRequest{Host: "host1", Blocks: []string{"gpu1", "gpu2", "gpu3", "gpu4", "nvme1", "nic1"}})
		composed <- err
	}()
	for deadline := time.Now().Add(30 * time.Second); len(fm.zoneMembers(t, "falcon1", "host1-pcie")) < 2; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the composition never reached the fabric:\n%s", b.stderr)
		}
	}
	proxy.cut()
	if err := b.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	cut := time.Now()
	waitLog(t, a, `msg="evicted a dead replica" replica=member/`+tagB+" settled_compositions=1", 30*time.Second)
	t.Logf("the leader evicted the replica cut from the database %s after the cut", time.Since(cut).Round(time.Millisecond))
	if got := fm.zoneMembers(t, "falcon1", "host1-pcie"); len(got) > 1 {
		t.Errorf("the fabric keeps %v for host1 after the eviction", got)
	}
	systems, err := c.client().Systems(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range systems {
		if s.SystemType == "Composed" {
			t.Errorf("system %s (%s) is stored after the eviction", s.ID, s.Status.State)
		}
	}
	if err := b.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-composed:
		if err == nil {
			t.Fatal("the evicted replica's composition succeeded")
		}
		t.Logf("the resumed replica's compose: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("the resumed replica never answered its compose")
	}
	if !strings.Contains(b.stderr.String(), "stale leadership epoch") {
		t.Errorf("the resumed replica's fabric changes were not refused for their epoch:\n%s", b.stderr)
	}
	if got := fm.zoneMembers(t, "falcon1", "host1-pcie"); len(got) > 1 {
		t.Errorf("the fabric holds %v for host1 after the evicted replica resumed", got)
	}
	proxy.restore()
	expectExit3(t, b, "the evicted replica, once it could reach the database,")

	// The leader is killed: c leads, and answers for the leader's
	// subsystems.
	a.kill()
	killed := time.Now()
	for deadline := time.Now().Add(30 * time.Second); !leads(c); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no replica leads after the leader's kill -9:\n%s", c.stderr)
		}
	}
	t.Logf("a replica leads %s after the leader's kill -9", time.Since(killed).Round(time.Millisecond))
	if status, by := answeredBy(t, c, "/redfish/v1/TelemetryService", ""); status != http.StatusOK || by != tagC {
		t.Errorf("TelemetryService after the takeover: %d by %q, want 200 by %s", status, by, tagC)
	}
	if _, err := c.client().Compose(ctx, api.ComposeRequest{Needs: []api.Need{{Kind: "gpu", Count: 1}}}); err != nil {
		t.Errorf("compose at the last replica: %v", err)
	}

	// A replica serving alone is refused beside active ones.
	out, err := runServe(t, t.TempDir(), env, "--store", url, "--topology", topo)
	if err == nil || !strings.Contains(out, "in use by another rackpool serve") {
		t.Errorf("a replica serving alone beside an active one: %v\n%s", err, out)
	}
	// --active without what it needs.
	for _, tc := range []struct {
		flags []string
		want  string
	}{
		{[]string{"--active"}, "--active need a postgres:// --store"},
		{[]string{"--active", "--store", url}, `is driven by "emulated"`},
		{[]string{"--active", "--standby", "--store", url, "--topology", topo}, "exclude each other"},
	} {
		out, err := runServe(t, t.TempDir(), env, tc.flags...)
		if err == nil || !strings.Contains(out, tc.want) {
			t.Errorf("serve %v: %v; want an error saying %q:\n%s", tc.flags, err, tc.want, out)
		}
	}
}

// sseStream reads s's event stream as the Administrator until ctx ends:
// each message's id and data.
func sseStream(t *testing.T, ctx context.Context, s *server) <-chan [2]string {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url+"/redfish/v1/EventService/SSE", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth("Administrator", password)
	res, err := s.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK {
		res.Body.Close()
		t.Fatalf("SSE at %s: %d", s.url, res.StatusCode)
	}
	out := make(chan [2]string, 64)
	go func() {
		defer res.Body.Close()
		defer close(out)
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(nil, 1<<20)
		id := ""
		for sc.Scan() {
			switch l := sc.Text(); {
			case strings.HasPrefix(l, "id: "):
				id = strings.TrimPrefix(l, "id: ")
			case strings.HasPrefix(l, "data: "):
				select {
				case out <- [2]string{id, strings.TrimPrefix(l, "data: ")}:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out
}

// awaitEvent returns the first message of stream whose data contains
// want, failing after 30 s or when the stream ends first.
func awaitEvent(t *testing.T, stream <-chan [2]string, want string) [2]string {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case m, ok := <-stream:
			if !ok {
				t.Fatalf("the SSE stream ended before an event with %s", want)
			}
			if strings.Contains(m[1], want) {
				return m
			}
		case <-timeout:
			t.Fatalf("no event with %s on the SSE stream", want)
		}
	}
}

// sharedFabrics starts a fabric-emulator for each fabric of the example
// rack, falcon1 first, with fabric time fabricTime: active replicas share
// every fabric.
func sharedFabrics(t *testing.T, fabricTime string) []*fabricEmulator {
	t.Helper()
	var fms []*fabricEmulator
	for _, f := range []string{"falcon1", "sas1", "ocs1", "vlan1"} {
		fms = append(fms, startFabricEmulator(t, f, "--fabric-time", fabricTime))
	}
	return fms
}

// login opens a session at s and returns its token.
func login(t *testing.T, s *server) string {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"UserName": "Administrator", "Password": password})
	res, err := s.http.Post(s.url+"/redfish/v1/SessionService/Sessions", "application/json", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	tok := res.Header.Get("X-Auth-Token")
	if res.StatusCode != http.StatusCreated || tok == "" {
		t.Fatalf("login: %d", res.StatusCode)
	}
	return tok
}
