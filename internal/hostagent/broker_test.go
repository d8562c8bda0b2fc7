package hostagent_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"rackpool/internal/compose"
	"rackpool/internal/hostagent"
)

// TestBroker: a step reaches only its host's poller, wakes a waiting poll,
// is offered again when the agent that took it never answers (it died)
// once the claim lapses, and ends with the agent's answer; answers for
// unknown steps or other hosts are refused; a step given up on is gone.
func TestBroker(t *testing.T) {
	b := hostagent.NewBroker(hostagent.Options{Hosts: []string{"h1", "h2"}, Claim: 100 * time.Millisecond})
	if !b.Managed("h1") || b.Managed("h3") {
		t.Fatal("Managed does not follow Options.Hosts")
	}
	ctx := context.Background()
	res := make(chan error, 1)
	step := compose.HostStep{ID: "sys-1.2.attach", Composition: "sys-1", Host: "h1", Op: "attach", Blocks: []string{"gpu1"}}
	polled := make(chan []compose.HostStep, 1)
	go func() { polled <- b.Poll(ctx, "h1", 5*time.Second) }() // waits: nothing yet
	time.Sleep(20 * time.Millisecond)
	go func() { res <- b.Run(ctx, step) }()
	got := <-polled
	if len(got) != 1 || got[0].ID != step.ID {
		t.Fatalf("h1's poll got %+v", got)
	}
	if other := b.Poll(ctx, "h2", 10*time.Millisecond); len(other) != 0 {
		t.Fatalf("h2 got h1's step: %+v", other)
	}
	// Claimed: not offered again at once...
	if again := b.Poll(ctx, "h1", 10*time.Millisecond); len(again) != 0 {
		t.Fatalf("a claimed step was offered again at once: %+v", again)
	}
	// ...but again once the claim lapsed: the agent that took it died.
	if again := b.Poll(ctx, "h1", time.Second); len(again) != 1 {
		t.Fatalf("after the claim lapsed: %+v", again)
	}
	if err := b.Complete("h2", step.ID, nil); !errors.Is(err, hostagent.ErrUnknownStep) {
		t.Fatalf("h2 answering h1's step = %v, want ErrUnknownStep", err)
	}
	if err := b.Complete("h1", step.ID, errors.New("not visible")); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if err := <-res; !errors.Is(err, hostagent.ErrFailed) || err.Error() != "the host agent reports: not visible" {
		t.Fatalf("Run = %v", err)
	}
	if err := b.Complete("h1", step.ID, nil); !errors.Is(err, hostagent.ErrUnknownStep) {
		t.Fatalf("a second answer = %v, want ErrUnknownStep", err)
	}
	// A step the control plane gives up on is withdrawn.
	short, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
	defer cancel()
	if err := b.Run(short, compose.HostStep{ID: "sys-2.1.detach", Host: "h1", Op: "detach"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Run past its deadline = %v", err)
	}
	if left := b.Pending("h1"); len(left) != 0 {
		t.Fatalf("withdrawn step still pending: %+v", left)
	}
	if b.LastSeen("h1").IsZero() || !b.LastSeen("h3").IsZero() {
		t.Error("LastSeen does not follow the polls")
	}
}

func TestParseHosts(t *testing.T) {
	known := func(h string) bool { return h == "host1" || h == "host2" }
	for _, v := range []string{"", "none"} {
		if o, err := hostagent.ParseHosts(v, known); err != nil || o.All || len(o.Hosts) != 0 {
			t.Errorf("ParseHosts(%q) = %+v, %v", v, o, err)
		}
	}
	if o, err := hostagent.ParseHosts("all", known); err != nil || !o.All {
		t.Errorf("ParseHosts(all) = %+v, %v", o, err)
	}
	if o, err := hostagent.ParseHosts("host1, host2", known); err != nil || len(o.Hosts) != 2 {
		t.Errorf("ParseHosts(host1, host2) = %+v, %v", o, err)
	}
	if _, err := hostagent.ParseHosts("host1,host9", known); err == nil {
		t.Error("an unknown host was accepted")
	}
}

// TestBrokerKick: Kick ends a waiting poll at once with no step (another
// replica's workflow waits on the host's agent), and is not remembered
// for a poll that starts later: that one still gets its steps.
func TestBrokerKick(t *testing.T) {
	b := hostagent.NewBroker(hostagent.Options{All: true})
	ctx := context.Background()
	polled := make(chan []compose.HostStep, 1)
	go func() { polled <- b.Poll(ctx, "h1", time.Hour) }()
	kick := time.NewTicker(10 * time.Millisecond) // until the poller waits
	defer kick.Stop()
	deadline := time.After(time.Minute)
	for done := false; !done; {
		select {
		case got := <-polled:
			if len(got) != 0 {
				t.Fatalf("a kicked poll returned steps: %+v", got)
			}
			done = true
		case <-kick.C:
			b.Kick("h1")
		case <-deadline:
			t.Fatal("Kick did not end the poll")
		}
	}
	b.Kick("h1") // nobody waits: forgotten
	step := compose.HostStep{ID: "sys-1.1.attach", Composition: "sys-1", Host: "h1", Op: "attach"}
	res := make(chan error, 1)
	go func() { res <- b.Run(ctx, step) }()
	if got := b.Poll(ctx, "h1", time.Minute); len(got) != 1 || got[0].ID != step.ID {
		t.Fatalf("a poll after a kick with nobody waiting got %+v", got)
	}
	if err := b.Complete("h1", step.ID, nil); err != nil {
		t.Fatal(err)
	}
	if err := <-res; err != nil {
		t.Fatal(err)
	}
}
