package bmcpower

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"rackpool/api"
	"rackpool/internal/bmc"
	"rackpool/internal/bmc/bmctest"
	"rackpool/internal/clock"
	"rackpool/internal/compose"
	"rackpool/internal/inventory"
)

// slowBMC is a BMC whose system reaches the state a reset leads to only
// after a number of reads, each of which moves the test's clock by the
// poll interval (the time Power waits between reads).
type slowBMC struct {
	clk *clock.Manual

	mu       sync.Mutex
	state    string
	pending  string // the state a reset leads to
	after    int    // reads until it is reached (-1: never)
	reads    int
	resets   []string
	boot     map[string]any
	unauthed bool
}

func (b *slowBMC) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if u, p, ok := r.BasicAuth(); b.unauthed || !ok || u != bmctest.User || p != bmctest.Password {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	send := func(code int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(v)
	}
	switch r.Method + " " + r.URL.Path {
	case "GET /redfish/v1/":
		send(200, map[string]any{"Systems": map[string]any{"@odata.id": "/redfish/v1/Systems"}})
	case "GET /redfish/v1/Systems":
		send(200, map[string]any{"Members": []any{map[string]any{"@odata.id": "/redfish/v1/Systems/1"}}})
	case "GET /redfish/v1/Systems/1":
		b.reads++
		if b.pending != "" && b.after >= 0 {
			if b.after == 0 {
				b.state, b.pending = b.pending, ""
			} else {
				b.after--
			}
		}
		b.clk.Advance(pollEvery)
		send(200, map[string]any{
			"@odata.id": "/redfish/v1/Systems/1", "@odata.type": "#ComputerSystem.v1_20_0.ComputerSystem",
			"PowerState": b.state, "Boot": b.boot,
			"Actions": map[string]any{"#ComputerSystem.Reset": map[string]any{
				"target":                            "/redfish/v1/Systems/1/Actions/ComputerSystem.Reset",
				"ResetType@Redfish.AllowableValues": []string{"On", "ForceOff", "GracefulShutdown", "PowerCycle"}}},
		})
	case "PATCH /redfish/v1/Systems/1":
		var body map[string]map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		for k, v := range body["Boot"] {
			b.boot[k] = v
		}
		w.WriteHeader(http.StatusNoContent)
	case "POST /redfish/v1/Systems/1/Actions/ComputerSystem.Reset":
		var body map[string]string
		_ = json.NewDecoder(r.Body).Decode(&body)
		b.resets = append(b.resets, body["ResetType"])
		if body["ResetType"] == "PowerCycle" {
			send(400, map[string]any{"error": map[string]any{"code": "Base.1.8.GeneralError", "message": "see ExtendedInfo",
				"@Message.ExtendedInfo": []any{map[string]any{"MessageId": "Base.1.8.ActionParameterNotSupported", "Message": "PowerCycle is not supported"}}}})
			return
		}
		w.WriteHeader(http.StatusNoContent)
	default:
		w.WriteHeader(http.StatusNotFound)
	}
}

// TestDriver: resets reach the BMC and Power waits, on its clock, for the
// state they lead to, no longer than the host's modelled time plus the
// settle time; refusals map to the composition manager's errors.
func TestDriver(t *testing.T) {
	clk := clock.NewManual(time.Unix(0, 0))
	b := &slowBMC{clk: clk, state: inventory.PowerOff, boot: map[string]any{"BootSourceOverrideEnabled": "Disabled", "BootSourceOverrideTarget": "None",
		"BootSourceOverrideTarget@Redfish.AllowableValues": []string{"None", "Pxe"}}}
	srv := httptest.NewServer(b)
	defer srv.Close()
	t.Setenv("TEST_BMC_PASSWORD", bmctest.Password)
	h := &inventory.Host{ID: "h1", PowerOn: 2 * time.Second, Shutdown: time.Second,
		BMC: &inventory.BMC{URL: srv.URL, User: bmctest.User, PasswordEnv: "TEST_BMC_PASSWORD"}}
	model := compose.ModelPower{Clock: clk}
	drivers, err := Drivers([]*inventory.Host{h, {ID: "h2"}}, model, Options{TLS: api.TLSConfig, Clock: clk, Settle: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := drivers(&inventory.Host{ID: "h2"}).(compose.ModelPower); !ok {
		t.Error("a host without a BMC is not driven by the model")
	}
	p := drivers(h)
	ctx := context.Background()

	caps, err := p.Caps(ctx, h)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"On", "ForceOff", "GracefulShutdown", "PowerCycle"}; !slices.Equal(caps.ResetTypes, want) || !slices.Equal(caps.BootTargets, []string{"None", "Pxe"}) {
		t.Errorf("caps %+v, want the BMC's reset types %v and boot targets None, Pxe", caps, want)
	}

	for _, tc := range []struct {
		name      string
		reset     string
		after     int // reads until the state changes
		to, want  string
		waitReads int // reads Power makes
	}{
		{"on after three reads", "On", 3, inventory.PowerOn, inventory.PowerOn, 4},
		{"force off at once", "ForceOff", 0, inventory.PowerOff, inventory.PowerOff, 1},
		// 1s shutdown + 3s settle: each read moves the clock 250ms; the 17th
		// is past 4s.
		{"a shutdown the host never finishes", "GracefulShutdown", -1, inventory.PowerOff, inventory.PowerOn, 17},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b.mu.Lock()
			b.state = map[string]string{"On": inventory.PowerOff}[tc.reset]
			if b.state == "" {
				b.state = inventory.PowerOn
			}
			b.pending, b.after, b.reads = tc.to, tc.after, 0
			b.mu.Unlock()
			got, err := p.Reset(ctx, h, inventory.Power{State: b.state}, tc.reset)
			if err != nil {
				t.Fatal(err)
			}
			b.mu.Lock()
			defer b.mu.Unlock()
			if got.State != tc.want || b.reads != tc.waitReads {
				t.Errorf("Reset %s = %s after %d reads, want %s after %d", tc.reset, got.State, b.reads, tc.want, tc.waitReads)
			}
		})
	}

	if _, err := p.Reset(ctx, h, inventory.Power{State: inventory.PowerOn}, "PowerCycle"); !errors.Is(err, compose.ErrPowerValue) {
		t.Errorf("a reset the BMC refuses: %v, want ErrPowerValue", err)
	}
	st, err := p.SetBoot(ctx, h, inventory.Power{}, inventory.Boot{Enabled: "Once", Target: "Pxe"})
	if err != nil || st.Boot.Target != "Pxe" || st.Boot.Enabled != "Once" {
		t.Errorf("SetBoot = %+v, %v", st, err)
	}
	if st, err := p.State(ctx, h, inventory.Power{}); err != nil || st.State != b.state {
		t.Errorf("State = %+v, %v; want the BMC's %s", st, err, b.state)
	}

	// A BMC that refuses the account is the host's fault, not the request's.
	b.mu.Lock()
	b.unauthed = true
	b.mu.Unlock()
	if _, err := p.State(ctx, h, inventory.Power{}); !errors.Is(err, compose.ErrPowerHost) || !errors.Is(err, bmc.ErrAuth) {
		t.Errorf("State with the account refused: %v, want ErrPowerHost and ErrAuth", err)
	}
}

// TestDrivers: serve refuses to start with a BMC whose password
// variable is unset or whose CA file cannot be read.
func TestDrivers(t *testing.T) {
	t.Setenv("TEST_BMC_PASSWORD", "")
	h := &inventory.Host{ID: "h1", BMC: &inventory.BMC{URL: "https://bmc", PasswordEnv: "TEST_BMC_PASSWORD"}}
	if _, err := Drivers([]*inventory.Host{h}, nil, Options{TLS: api.TLSConfig}); err == nil {
		t.Error("a BMC without its password accepted")
	}
	t.Setenv("TEST_BMC_PASSWORD", "x")
	h.BMC.CAFile = t.TempDir() + "/missing.pem"
	if _, err := Drivers([]*inventory.Host{h}, nil, Options{TLS: api.TLSConfig}); err == nil {
		t.Error("a BMC with a missing CA file accepted")
	}
}
