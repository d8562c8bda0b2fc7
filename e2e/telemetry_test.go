package e2e

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"rackpool/api"
	"rackpool/internal/childproc"
	"rackpool/internal/memory"
)

// TestTelemetry runs the real agent on this machine against a real serve
// for a tenant's composed system, a memnode whose lease a client writes
// and a cache that spills to pooled memory, and checks the MetricReports
// show what they use; another tenant's agent is refused; the samples
// survive a restart of serve.
func TestTelemetry(t *testing.T) {
	skipShort(t)
	s := startDefault(t, "--fabric-time", "instant", "--telemetry-checkpoint", "1h")
	ctx := context.Background()
	admin := s.client()
	for _, tenant := range []string{"blue", "red"} {
		if _, err := admin.Do(ctx, "POST", "/redfish/v1/AccountService/Oem/Rackpool/Tenants", map[string]any{"Id": tenant}, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := admin.Do(ctx, "POST", "/redfish/v1/AccountService/Accounts", map[string]any{"UserName": "agent-" + tenant,
			"Password": "agent-pass-" + tenant, "RoleId": "Operator", "Oem": map[string]any{"Rackpool": map[string]any{"Tenant": tenant}}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	blue := s.clientAs("agent-blue", "agent-pass-blue")
	sys, err := blue.Compose(ctx, api.ComposeRequest{Host: "host1", Blocks: []string{"gpu1"}})
	if err != nil {
		t.Fatal(err)
	}

	// An agent with the red tenant's account cannot report for blue's
	// system, nor one with a wrong password: both stop at once.
	for _, cred := range [][2]string{{"agent-red", "agent-pass-red"}, {"agent-blue", "wrong-password"}} {
		out, err := runAgentCmd(s, cred, "--system", sys.ID, "--interval", "200ms").CombinedOutput()
		if err == nil {
			t.Fatalf("agent as %s ran: %s", cred[0], out)
		}
		if !strings.Contains(string(out), "not found") && !strings.Contains(string(out), "refuses") {
			t.Errorf("agent as %s: %s", cred[0], out)
		}
	}

	agent := runAgentCmd(s, [2]string{"agent-blue", "agent-pass-blue"}, "--system", sys.ID, "--interval", "200ms")
	logs := &syncBuffer{}
	agent.Stderr = logs
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if agent.ProcessState == nil {
			_ = agent.Process.Kill()
			_ = agent.Wait()
		}
	})
	source := "/redfish/v1/Systems/" + sys.ID
	used := waitReport(t, blue, "SystemUsage", source, "memory_used_bytes", 20*time.Second, logs)
	if v, err := strconv.ParseFloat(used, 64); err != nil || v <= 0 {
		t.Fatalf("memory_used_bytes = %q", used)
	}
	// A few intervals: a window of several samples, growing in time.
	deadline := time.Now().Add(20 * time.Second)
	var series *api.UsageSeries
	for {
		series, err = blue.UsageSeries(ctx, "System", sys.ID, "memory_used_bytes", time.Time{}, 0)
		if err == nil && len(series.Samples) >= 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("series after 20s: %+v %v\n%s", series, err, logs)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for i := 1; i < len(series.Samples); i++ {
		if !series.Samples[i].Timestamp.After(series.Samples[i-1].Timestamp) || series.Samples[i].Value <= 0 {
			t.Fatalf("samples = %+v", series.Samples)
		}
	}
	// The red tenant sees none of it.
	red := s.clientAs("agent-red", "agent-pass-red")
	if rep, err := red.MetricReport(ctx, "SystemUsage"); err != nil || len(rep.MetricValues) != 0 {
		t.Errorf("red's report: %+v %v", rep, err)
	}
	// SIGTERM stops the agent cleanly.
	if err := agent.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := agent.Wait(); err != nil {
		t.Errorf("agent after SIGTERM: %v\n%s", err, logs)
	}
	if !strings.Contains(logs.String(), "agent stopping") || strings.Contains(logs.String(), "agent-pass-blue") {
		t.Errorf("agent log:\n%s", logs)
	}

	// A memnode reports the bytes a client wrote into a lease.
	startMemnode(t, s, "--capacity", "64MiB", "--heartbeat", "200ms")
	l, err := blue.GetMemory(ctx, api.LeaseRequest{Size: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	mc, err := memory.Dial(ctx, l.Endpoint, l.Token)
	if err != nil {
		t.Fatal(err)
	}
	defer mc.Close()
	if err := mc.Write(ctx, 0, make([]byte, 10000)); err != nil { // pages 0..2
		t.Fatal(err)
	}
	if got := waitReport(t, blue, "MemoryLeaseUsage", "/redfish/v1/Oem/Rackpool/MemoryLeases/"+l.ID, "bytes_in_use", 20*time.Second, nil); got != "12288" {
		// The first heartbeat may predate the write; wait for the next.
		deadline := time.Now().Add(10 * time.Second)
		for got != "12288" && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
			got = waitReport(t, blue, "MemoryLeaseUsage", "/redfish/v1/Oem/Rackpool/MemoryLeases/"+l.ID, "bytes_in_use", time.Second, nil)
		}
		if got != "12288" {
			t.Errorf("lease bytes in use = %s, want 12288", got)
		}
	}

	// A cache reports its remote tier's working set on its lease.
	cache := startProc(t, s, "cache", "--local-memory", "1MiB", "--remote-memory", "16MiB", "--control", s.url, "--usage-interval", "200ms")
	m := dialMC(t, cache.addr)
	for i := range 200 {
		m.set("k"+strconv.Itoa(i), make([]byte, 16<<10)) // 3.2 MB of values: most spill
	}
	deadline = time.Now().Add(20 * time.Second)
	for {
		rep, err := admin.MetricReport(ctx, "CacheUsage")
		live := 0.0
		if err == nil {
			for _, v := range rep.MetricValues {
				if v.MetricId == "remote_live_bytes" {
					live, _ = strconv.ParseFloat(v.MetricValue, 64)
				}
			}
		}
		if live > 1<<20 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("CacheUsage after 20s: %+v %v\n%s", rep, err, cache.stderr)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// A graceful restart keeps the samples (checkpointed at shutdown).
	before := len(series.Samples)
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Wait(); err != nil {
		t.Fatalf("serve after SIGTERM: %v\n%s", err, s.stderr)
	}
	s2 := startAt(t, s.addr, s.data, []string{"RACKPOOL_ADMIN_PASSWORD=" + password})
	after, err := s2.clientAs("agent-blue", "agent-pass-blue").UsageSeries(ctx, "System", sys.ID, "memory_used_bytes", time.Time{}, 0)
	if err != nil || len(after.Samples) < before {
		t.Errorf("after a restart: %d samples (%v), had %d", len(after.Samples), err, before)
	}
}

// runAgentCmd is `rackpool agent --control URL args...` as user.
func runAgentCmd(s *server, cred [2]string, args ...string) *exec.Cmd {
	cmd := childproc.Command(binary, append([]string{"agent", "--control", s.url}, args...)...)
	cmd.Env = append(os.Environ(), "RACKPOOL_USER="+cred[0], "RACKPOOL_PASSWORD="+cred[1], "RACKPOOL_CA_FILE="+s.ca)
	return cmd
}

// waitReport polls a MetricReport until it has metric for source and
// returns its value ("" after timeout).
func waitReport(t *testing.T, c *api.Client, report, source, metric string, timeout time.Duration, logs *syncBuffer) string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		rep, err := c.MetricReport(context.Background(), report)
		if err == nil {
			for _, v := range rep.MetricValues {
				if v.MetricProperty == source && v.MetricId == metric {
					return v.MetricValue
				}
			}
		}
		if time.Now().After(deadline) {
			if logs != nil {
				t.Fatalf("%s has no %s for %s after %v: %+v %v\n%s", report, metric, source, timeout, rep, err, logs)
			}
			return ""
		}
		time.Sleep(100 * time.Millisecond)
	}
}
