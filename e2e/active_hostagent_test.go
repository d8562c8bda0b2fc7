package e2e

import (
	"context"
	"testing"
	"time"

	"rackpool/api"
)

// TestPostgresActiveHostAgents: two active replicas, host1 managed by its
// agent, and the agent polling replica b only. A system composed and
// decomposed at replica a waits on the agent's steps there; the agent's
// polls and answers at b are routed to a (b hands a waiting poll back as
// soon as it learns that a's workflow waits on host1), so a composition
// is Composed once the device is visible on the host and a decomposition
// removes it first; at b, where the agent asks, the same works locally.
func TestPostgresActiveHostAgents(t *testing.T) {
	skipShort(t)
	_, url := startPostgres(t)
	fms := sharedFabrics(t, "instant")
	topo := redfishRack(t, fms...)
	env := append([]string{"RACKPOOL_ADMIN_PASSWORD=" + password}, fmEnv(fms...)...)
	flags := []string{"--active", "--store", url, "--topology", topo, "--host-agents", "host1", "--host-agent-timeout", "60s"}
	a := start(t, t.TempDir(), env, flags...)
	waitLog(t, a, "active replica leads", 20*time.Second)
	b := start(t, t.TempDir(), env, flags...)
	ctx := context.Background()
	agentPass := hostAgentAccount(t, a.client(), "host1")
	k := startKernel(t)
	agentLog := &syncBuffer{}
	agent := runAgentCmd(b, [2]string{"agent-host1", agentPass}, "--host", "host1", "--sysfs-root", k.root, "--proc-root", k.root)
	agent.Stderr = agentLog
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = agent.Process.Kill(); _ = agent.Wait() })

	for _, at := range []struct {
		name string
		s    *server
	}{{"a (the agent polls b)", a}, {"b (where the agent polls)", b}, {"a again", a}} {
		c := at.s.client()
		sys, err := c.Compose(ctx, api.ComposeRequest{Host: "host1", Blocks: []string{"gpu1"}})
		if err != nil {
			t.Fatalf("compose on host1 at %s: %v\nagent: %s", at.name, err, agentLog)
		}
		if !k.visible() || sys.Oem.Rackpool.CompositionState != "Composed" {
			t.Fatalf("composed at %s: %s (%s), the device visible on the host: %v", at.name, sys.ID, sys.Oem.Rackpool.CompositionState, k.visible())
		}
		if err := c.Decompose(ctx, sys.ID); err != nil {
			t.Fatalf("decompose at %s: %v\nagent: %s", at.name, err, agentLog)
		}
		if k.visible() {
			t.Fatalf("decomposed at %s, but the device is still on the host", at.name)
		}
	}
}

// TestPostgresActiveTelemetry: usage samples pushed through one replica
// (forwarded to the leader) and acknowledged are all at the next leader
// after the leader's kill -9, with no checkpoint between: each push is
// committed before it is acknowledged (docs/telemetry.md).
func TestPostgresActiveTelemetry(t *testing.T) {
	skipShort(t)
	_, url := startPostgres(t)
	fms := sharedFabrics(t, "instant")
	topo := redfishRack(t, fms...)
	env := append([]string{"RACKPOOL_ADMIN_PASSWORD=" + password}, fmEnv(fms...)...)
	// A checkpoint an hour: only the pushes' own writes can carry the
	// samples over.
	flags := []string{"--active", "--store", url, "--topology", topo, "--telemetry-checkpoint", "1h"}
	a := start(t, t.TempDir(), env, flags...)
	waitLog(t, a, "active replica leads", 20*time.Second)
	b := start(t, t.TempDir(), env, flags...)
	ctx := context.Background()
	sys, err := b.client().Compose(ctx, api.ComposeRequest{Needs: []api.Need{{Kind: "gpu", Count: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now().Add(-time.Minute).Truncate(time.Second)
	const pushes = 20
	for i := range pushes {
		at := start.Add(time.Duration(i) * time.Second)
		if err := b.client().SubmitSystemUsage(ctx, sys.ID, []api.UsageSample{{MetricId: "memory_used_bytes", Timestamp: at, Value: float64(i << 20)}}); err != nil {
			t.Fatalf("push %d through b: %v", i, err)
		}
	}
	a.kill()
	for deadline := time.Now().Add(30 * time.Second); !leads(b); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("b does not lead after the leader's kill -9:\n%s", b.stderr)
		}
	}
	series, err := b.client().UsageSeries(ctx, "System", sys.ID, "memory_used_bytes", time.Time{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(series.Samples) != pushes {
		t.Fatalf("the new leader holds %d of the %d acknowledged samples: %+v", len(series.Samples), pushes, series.Samples)
	}
	for i, sm := range series.Samples {
		if sm.Value != float64(i<<20) || !sm.Timestamp.Equal(start.Add(time.Duration(i)*time.Second)) {
			t.Fatalf("sample %d is %+v", i, sm)
		}
	}
}
