package bmc

// The tests run the real sushy-emulator with its fake driver through
// bmctest, whose package doc lists where the fake differs from a real BMC.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"rackpool/internal/bmc/bmctest"
	"rackpool/internal/childproc"
)

// client is a Client of the emulator's system (as Options.System).
func client(t *testing.T, e *bmctest.Emulator, system string) *Client {
	t.Helper()
	c, err := New(context.Background(), Options{URL: e.URL, System: system, User: bmctest.User, Password: bmctest.Password, TLS: e.TLS})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// localError checks err is the Client's own 400 refusal with id.
func localError(t *testing.T, err error, id string) {
	t.Helper()
	var be *Error
	if !errors.As(err, &be) || !be.Local || be.Status != http.StatusBadRequest || be.MessageID != id {
		t.Fatalf("want a local 400 %s *Error, got %#v (%v)", id, be, err)
	}
}

func sys(n int, name, power string) bmctest.System {
	return bmctest.System{UUID: fmt.Sprintf("%08d-0000-4000-8000-000000000000", n), Name: name, Power: power}
}

func TestNew(t *testing.T) {
	a, b := sys(1, "host-a", "Off"), sys(2, "host-b", "On")
	e := bmctest.Start(t, []bmctest.System{a, b}, "")
	ctx := context.Background()

	for _, tc := range []struct{ name, system string }{
		{"by Id", a.UUID},
		{"by path", a.Path()},
		{"by path with a slash", a.Path() + "/"},
		{"by Name, redirected to the UUID", a.Name},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := client(t, e, tc.system)
			if c.Path() != a.Path() {
				t.Fatalf("Path() = %s, want %s", c.Path(), a.Path())
			}
			st, err := c.State(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if st.PowerState != "Off" {
				t.Fatalf("PowerState %s, want Off", st.PowerState)
			}
		})
	}

	t.Run("no system named, two on the BMC", func(t *testing.T) {
		_, err := New(ctx, Options{URL: e.URL, User: bmctest.User, Password: bmctest.Password})
		if err == nil || !strings.Contains(err.Error(), "has 2 systems") || !strings.Contains(err.Error(), a.Path()) {
			t.Fatalf("err = %v, want one saying the BMC has 2 systems and naming them", err)
		}
		t.Log(err)
	})

	t.Run("unknown system", func(t *testing.T) {
		_, err := New(ctx, Options{URL: e.URL, System: "no-such-host", User: bmctest.User, Password: bmctest.Password})
		var be *Error
		if !errors.As(err, &be) || be.Status != http.StatusNotFound {
			t.Fatalf("err = %v, want a 404 *Error", err)
		}
		for _, want := range []string{`no ComputerSystem "no-such-host"`, e.URL, a.Path(), b.Path()} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not mention %q", err, want)
			}
		}
		t.Log(err)
	})

	t.Run("not a ComputerSystem", func(t *testing.T) {
		_, err := New(ctx, Options{URL: e.URL, System: "/redfish/v1/Chassis", User: bmctest.User, Password: bmctest.Password})
		if err == nil || !strings.Contains(err.Error(), "not a ComputerSystem") {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestAuth(t *testing.T) {
	only := sys(1, "only", "Off")
	e := bmctest.Start(t, []bmctest.System{only}, "")
	ctx := context.Background()

	c := client(t, e, "") // the only member of Systems
	if c.Path() != only.Path() {
		t.Fatalf("Path() = %s, want %s", c.Path(), only.Path())
	}

	for _, tc := range []struct{ name, user, password string }{
		{"wrong password", bmctest.User, "not-" + bmctest.Password},
		{"unknown user", "mallory", bmctest.Password},
		{"no credentials", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(ctx, Options{URL: e.URL, User: tc.user, Password: tc.password})
			if !errors.Is(err, ErrAuth) {
				t.Fatalf("err = %v, want ErrAuth", err)
			}
			var be *Error
			if !errors.As(err, &be) || be.Status != http.StatusUnauthorized || be.Local {
				t.Fatalf("err = %#v, want the BMC's 401 *Error", be)
			}
			msg := err.Error()
			if !strings.Contains(msg, e.URL) || !strings.Contains(msg, fmt.Sprintf("%q", tc.user)) || !strings.Contains(msg, "401") {
				t.Errorf("error %q should name the BMC, the user and the status", msg)
			}
			if tc.password != "" && strings.Contains(msg, tc.password) {
				t.Errorf("error %q shows the password", msg)
			}
			t.Log(msg)
		})
	}
}

func TestPower(t *testing.T) {
	systems := []bmctest.System{
		sys(1, "on-then-off", "Off"),
		sys(2, "force-on", "Off"),
		sys(3, "graceful-shutdown", "On"),
		sys(4, "force-restart", "On"),
		sys(5, "graceful-restart", "On"),
	}
	e := bmctest.Start(t, systems, "")
	ctx := context.Background()

	// Each walks one system; the transitions take seconds, so in parallel.
	t.Run("On then ForceOff", func(t *testing.T) {
		t.Parallel()
		s := systems[0]
		c := client(t, e, s.UUID)
		if err := c.Reset(ctx, "On"); err != nil {
			t.Fatal(err)
		}
		t.Logf("On took %s", e.WaitPower(t, s, "On"))
		if st, err := c.State(ctx); err != nil || st.PowerState != "On" {
			t.Fatalf("State() = %+v, %v; want On", st, err)
		}
		if err := c.Reset(ctx, "ForceOff"); err != nil {
			t.Fatal(err)
		}
		t.Logf("ForceOff took %s", e.WaitPower(t, s, "Off"))
	})
	t.Run("ForceOn", func(t *testing.T) {
		t.Parallel()
		s := systems[1]
		if err := client(t, e, s.UUID).Reset(ctx, "ForceOn"); err != nil {
			t.Fatal(err)
		}
		e.WaitPower(t, s, "On")
	})
	t.Run("GracefulShutdown", func(t *testing.T) {
		t.Parallel()
		s := systems[2]
		if err := client(t, e, s.UUID).Reset(ctx, "GracefulShutdown"); err != nil {
			t.Fatal(err)
		}
		e.WaitPower(t, s, "Off")
	})
	for _, s := range systems[3:] {
		t.Run(s.Name, func(t *testing.T) {
			t.Parallel()
			rt := map[string]string{"force-restart": "ForceRestart", "graceful-restart": "GracefulRestart"}[s.Name]
			if err := client(t, e, s.UUID).Reset(ctx, rt); err != nil {
				t.Fatal(err)
			}
			// The fake goes Off at once and On later.
			if got := e.System(t, s).PowerState; got != "Off" {
				t.Errorf("right after %s PowerState is %s, want Off", rt, got)
			}
			e.WaitPower(t, s, "On")
		})
	}
}

func TestResetRefused(t *testing.T) {
	s := sys(1, "host", "On")
	e := bmctest.Start(t, []bmctest.System{s}, "")
	ctx := context.Background()
	c := client(t, e, s.UUID)

	st, err := c.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"On", "ForceOff", "GracefulShutdown", "GracefulRestart", "ForceRestart", "Nmi", "ForceOn"}
	if !slices.Equal(st.ResetTypes, want) {
		t.Fatalf("ResetTypes = %v, want %v", st.ResetTypes, want)
	}

	// Nmi is listed, so it is sent, and the fake refuses it.
	err = c.Reset(ctx, "Nmi")
	var be *Error
	if !errors.As(err, &be) || be.Local || be.Status != http.StatusNotImplemented || be.MessageID != "Base.1.0.GeneralError" ||
		!strings.Contains(be.Message, "Nmi is not supported") || !strings.HasSuffix(be.URL, s.Path()+"/Actions/ComputerSystem.Reset") {
		t.Fatalf("Reset(Nmi) = %v, want the emulator's 501 Base.1.0.GeneralError", err)
	}
	t.Log(err)

	// Types the BMC does not list are refused without sending them.
	localError(t, c.Reset(ctx, "PowerCycle"), MsgActionParameterValueNotInList)
	localError(t, c.Reset(ctx, ""), MsgPropertyMissing)

	if got := e.System(t, s).PowerState; got != "On" {
		t.Fatalf("PowerState %s after refused resets, want On", got)
	}
}

// recorder is a reverse proxy in front of the emulator that records every
// request other than a GET.
type recorder struct {
	mu   sync.Mutex
	reqs []recorded
}

type recorded struct {
	method, path, ifMatch string
	body                  map[string]any
}

func (r *recorder) start(t *testing.T, target string) string {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodGet {
			body, _ := io.ReadAll(req.Body)
			rec := recorded{method: req.Method, path: req.URL.Path, ifMatch: req.Header.Get("If-Match")}
			_ = json.Unmarshal(body, &rec.body)
			r.mu.Lock()
			r.reqs = append(r.reqs, rec)
			r.mu.Unlock()
			req.Body = io.NopCloser(bytes.NewReader(body))
		}
		proxy.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func (r *recorder) take() []recorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.reqs
	r.reqs = nil
	return out
}

func TestBoot(t *testing.T) {
	s := sys(1, "host", "Off")
	e := bmctest.Start(t, []bmctest.System{s}, "")
	ctx := context.Background()
	var rec recorder
	c, err := New(ctx, Options{URL: rec.start(t, e.URL), System: s.UUID, User: bmctest.User, Password: bmctest.Password})
	if err != nil {
		t.Fatal(err)
	}

	st, err := c.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantBoot := Boot{Enabled: "Continuous", Target: "Hdd", Mode: "UEFI", UefiTarget: "/0x31/0x33/0x01/0x01"}
	if st.Boot != wantBoot || !slices.Equal(st.BootTargets, []string{"Pxe", "Cd", "Hdd", "UefiHttp"}) || st.ETag != "" {
		t.Fatalf("State() = %+v, want Boot %+v, targets Pxe Cd Hdd UefiHttp, no ETag", st, wantBoot)
	}

	// Once and Pxe: the emulator stores the target and ignores Enabled
	// (the fake always says Continuous; a real BMC says Once until the
	// next boot, then Disabled).
	if err := c.SetBoot(ctx, Boot{Enabled: "Once", Target: "Pxe"}); err != nil {
		t.Fatal(err)
	}
	got := e.System(t, s).Boot
	if got.BootSourceOverrideTarget != "Pxe" || got.BootSourceOverrideMode != "UEFI" {
		t.Fatalf("emulator's Boot = %+v, want target Pxe, mode UEFI", got)
	}
	if got.BootSourceOverrideEnabled != "Continuous" {
		t.Logf("the fake driver now keeps BootSourceOverrideEnabled (%s): update the note in bmctest's package doc", got.BootSourceOverrideEnabled)
	}
	reqs := rec.take()
	wantPatch := map[string]any{"Boot": map[string]any{"BootSourceOverrideEnabled": "Once", "BootSourceOverrideTarget": "Pxe"}}
	if len(reqs) != 1 || reqs[0].method != http.MethodPatch || reqs[0].path != s.Path() || reqs[0].ifMatch != "" || !jsonEqual(reqs[0].body, wantPatch) {
		t.Fatalf("sent %+v, want one PATCH %s of %v without If-Match (the emulator gives no ETag)", reqs, s.Path(), wantPatch)
	}

	// Legacy mode: only the mode is sent, and the BMC's allowable targets
	// lose UefiHttp, which SetBoot then refuses from a fresh read.
	if err := c.SetBoot(ctx, Boot{Mode: "Legacy"}); err != nil {
		t.Fatal(err)
	}
	if got := e.System(t, s).Boot; got.BootSourceOverrideMode != "Legacy" || got.BootSourceOverrideTarget != "Pxe" {
		t.Fatalf("emulator's Boot = %+v, want mode Legacy, target still Pxe", got)
	}
	if reqs := rec.take(); len(reqs) != 1 || !jsonEqual(reqs[0].body, map[string]any{"Boot": map[string]any{"BootSourceOverrideMode": "Legacy"}}) {
		t.Fatalf("sent %+v, want one PATCH of the mode alone", reqs)
	}
	localError(t, c.SetBoot(ctx, Boot{Target: "UefiHttp"}), MsgPropertyValueNotInList)

	// Targets the BMC does not list are refused before sending (the fake
	// would store them).
	localError(t, c.SetBoot(ctx, Boot{Target: "Floppy", Enabled: "Once"}), MsgPropertyValueNotInList)
	localError(t, c.SetBoot(ctx, Boot{}), MsgPropertyMissing)
	if reqs := rec.take(); len(reqs) != 0 {
		t.Fatalf("refused SetBoots sent %+v", reqs)
	}
	if got := e.System(t, s).Boot.BootSourceOverrideTarget; got != "Pxe" {
		t.Fatalf("emulator's target %s after refused SetBoots, want Pxe", got)
	}

	// The emulator's own refusal: Enabled alone is a 400 with a plain
	// text body.
	err = c.SetBoot(ctx, Boot{Enabled: "Once"})
	var be *Error
	if !errors.As(err, &be) || be.Local || be.Status != http.StatusBadRequest || be.MessageID != "" || !strings.Contains(be.Message, "Missing the BootSourceOverrideTarget") {
		t.Fatalf("SetBoot(Enabled only) = %v, want the emulator's 400", err)
	}
	t.Log(err)
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

func TestTLS(t *testing.T) {
	s := sys(1, "host", "Off")
	tlsDir := t.TempDir()
	e := bmctest.Start(t, []bmctest.System{s}, tlsDir)
	ctx := context.Background()

	c := client(t, e, "")
	if err := c.SetBoot(ctx, Boot{Target: "Cd"}); err != nil {
		t.Fatal(err)
	}
	if got := e.System(t, s).Boot.BootSourceOverrideTarget; got != "Cd" {
		t.Fatalf("emulator's target %s, want Cd", got)
	}

	// The system's roots do not trust pki's CA.
	_, err := New(ctx, Options{URL: e.URL, User: bmctest.User, Password: bmctest.Password})
	var te *TransportError
	if !errors.As(err, &te) || !strings.Contains(err.Error(), "certificate is not trusted") || !strings.Contains(err.Error(), e.URL) {
		t.Fatalf("err = %v, want a *TransportError saying the certificate is not trusted", err)
	}
	if strings.Contains(err.Error(), bmctest.Password) {
		t.Fatalf("error %q shows the password", err)
	}
	t.Log(err)
}

// TestSushyLibrary checks that sushy, Ironic's Redfish library, drives the
// emulator (testdata/sushy_smoke.py), so that a later end-to-end test can
// use it.
func TestSushyLibrary(t *testing.T) {
	python := filepath.Join(filepath.Dir(bmctest.Binary(t)), "python")
	if out, err := childproc.Command(python, "-c", "import sushy").CombinedOutput(); err != nil {
		bmctest.Need(t, "%s cannot import sushy (run scripts/pyenv.sh): %v\n%s", python, err, out)
	}
	s := sys(1, "host", "Off")
	e := bmctest.Start(t, []bmctest.System{s}, "")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := childproc.CommandContext(ctx, python, filepath.Join("testdata", "sushy_smoke.py"), e.URL, bmctest.User, bmctest.Password, s.Path())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("sushy_smoke.py: %v\n%s", err, stderr.String())
	}
	var got struct {
		Identity         string   `json:"identity"`
		PowerStateBefore string   `json:"power_state_before"`
		AllowedReset     []string `json:"allowed_reset"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("sushy_smoke.py printed %q: %v", out, err)
	}
	if got.Identity != s.UUID || got.PowerStateBefore != "Off" || !slices.Contains(got.AllowedReset, "On") {
		t.Fatalf("sushy read %+v", got)
	}
	if boot := e.System(t, s).Boot; boot.BootSourceOverrideTarget != "Pxe" {
		t.Fatalf("emulator's Boot after sushy = %+v, want target Pxe", boot)
	}
	e.WaitPower(t, s, "On")
}

// fakeBMC is a BMC in-process with what the emulator lacks: ETags (and a
// concurrent change), an ActionInfo, a Redfish 400, an oversized answer and
// a redirect to another host.
type fakeBMC struct {
	mu      sync.Mutex
	etag    int
	boot    map[string]any
	patches []recorded
	posts   []map[string]any
	bump    bool // the next PATCH finds the system changed since it was read
}

func (f *fakeBMC) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if u, p, ok := r.BasicAuth(); !ok || u != bmctest.User || p != bmctest.Password {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	send := func(code int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(v)
	}
	refuse := func(code int, id, msg string) {
		send(code, map[string]any{"error": map[string]any{"code": "Base.1.8.GeneralError", "message": "see ExtendedInfo",
			"@Message.ExtendedInfo": []any{map[string]any{"MessageId": id, "Message": msg}}}})
	}
	switch r.Method + " " + r.URL.Path {
	case "GET /redfish/v1/":
		send(200, map[string]any{"Systems": map[string]any{"@odata.id": "/redfish/v1/Systems"}})
	case "GET /redfish/v1/Systems":
		send(200, map[string]any{"Members": []any{map[string]any{"@odata.id": "/redfish/v1/Systems/1"}}})
	case "GET /redfish/v1/Systems/1":
		w.Header().Set("ETag", fmt.Sprintf(`W/"%d"`, f.etag))
		send(200, map[string]any{
			"@odata.id": "/redfish/v1/Systems/1", "@odata.type": "#ComputerSystem.v1_20_0.ComputerSystem",
			"PowerState": "On", "Boot": f.boot,
			"Actions": map[string]any{"#ComputerSystem.Reset": map[string]any{
				"target":              "/redfish/v1/Systems/1/Actions/ComputerSystem.Reset",
				"@Redfish.ActionInfo": "/redfish/v1/Systems/1/ResetActionInfo"}},
		})
	case "GET /redfish/v1/Systems/1/ResetActionInfo":
		send(200, map[string]any{"Parameters": []any{
			map[string]any{"Name": "ResetType", "Required": true, "AllowableValues": []string{"On", "ForceOff", "PowerCycle"}}}})
	case "PATCH /redfish/v1/Systems/1":
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		f.patches = append(f.patches, recorded{method: r.Method, path: r.URL.Path, ifMatch: r.Header.Get("If-Match"), body: body})
		if f.bump {
			f.bump = false
			f.etag++
		}
		if r.Header.Get("If-Match") != fmt.Sprintf(`W/"%d"`, f.etag) {
			refuse(412, "Base.1.8.PreconditionFailed", "The ETag supplied did not match the ETag required to change this resource.")
			return
		}
		for k, v := range body["Boot"].(map[string]any) {
			f.boot[k] = v
		}
		f.etag++
		w.WriteHeader(http.StatusNoContent)
	case "POST /redfish/v1/Systems/1/Actions/ComputerSystem.Reset":
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		f.posts = append(f.posts, body)
		if body["ResetType"] == "PowerCycle" {
			refuse(400, "Base.1.8.ActionParameterNotSupported", "The parameter PowerCycle for the action ComputerSystem.Reset is not supported on the target resource.")
			return
		}
		w.WriteHeader(http.StatusNoContent)
	case "GET /redfish/v1/Systems/big":
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(bytes.Repeat([]byte(" "), maxBody+10))
	case "GET /redfish/v1/Systems/away":
		http.Redirect(w, r, "http://127.0.0.2:9/redfish/v1/Systems/1", http.StatusTemporaryRedirect)
	default:
		refuse(404, "Base.1.8.ResourceNotFound", "not found")
	}
}

func TestFakeBMC(t *testing.T) {
	f := &fakeBMC{boot: map[string]any{"BootSourceOverrideEnabled": "Disabled", "BootSourceOverrideTarget": "None",
		"BootSourceOverrideTarget@Redfish.AllowableValues": []string{"None", "Pxe", "Hdd"}}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	ctx := context.Background()
	c, err := New(ctx, Options{URL: srv.URL + "/redfish/v1/", User: bmctest.User, Password: bmctest.Password})
	if err != nil {
		t.Fatal(err)
	}

	st, err := c.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(st.ResetTypes, []string{"On", "ForceOff", "PowerCycle"}) || st.ETag != `W/"0"` {
		t.Fatalf("State() = %+v, want the ActionInfo's ResetTypes and ETag W/\"0\"", st)
	}

	t.Run("If-Match, and a 412 read again", func(t *testing.T) {
		f.mu.Lock()
		f.bump = true
		f.mu.Unlock()
		if err := c.SetBoot(ctx, Boot{Enabled: "Once", Target: "Pxe"}); err != nil {
			t.Fatal(err)
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		if len(f.patches) != 2 || f.patches[0].ifMatch != `W/"0"` || f.patches[1].ifMatch != `W/"1"` {
			t.Fatalf("PATCHes %+v, want If-Match W/\"0\" then, after the 412, W/\"1\"", f.patches)
		}
		if f.boot["BootSourceOverrideTarget"] != "Pxe" || f.boot["BootSourceOverrideEnabled"] != "Once" {
			t.Fatalf("boot %v", f.boot)
		}
	})

	t.Run("the BMC's 400", func(t *testing.T) {
		err := c.Reset(ctx, "PowerCycle")
		var be *Error
		if !errors.As(err, &be) || be.Local || be.Status != 400 || be.MessageID != "Base.1.8.ActionParameterNotSupported" ||
			!strings.Contains(be.Message, "PowerCycle for the action") {
			t.Fatalf("err = %v, want the BMC's 400 with its ExtendedInfo", err)
		}
		localError(t, c.Reset(ctx, "Nmi"), MsgActionParameterValueNotInList) // not in the ActionInfo
		if err := c.Reset(ctx, "On"); err != nil {
			t.Fatal(err)
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		if len(f.posts) != 2 || f.posts[1]["ResetType"] != "On" {
			t.Fatalf("POSTs %v", f.posts)
		}
	})

	t.Run("an oversized answer", func(t *testing.T) {
		_, err := New(ctx, Options{URL: srv.URL, System: "/redfish/v1/Systems/big", User: bmctest.User, Password: bmctest.Password})
		if err == nil || !strings.Contains(err.Error(), "larger than 4 MiB") {
			t.Fatalf("err = %v", err)
		}
	})

	t.Run("a redirect to another host", func(t *testing.T) {
		_, err := New(ctx, Options{URL: srv.URL, System: "away", User: bmctest.User, Password: bmctest.Password})
		if err == nil || !strings.Contains(err.Error(), "refusing redirect") {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestOptions(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct{ name, url, want string }{
		{"plain http elsewhere", "http://192.0.2.7", "refusing to send credentials over plain http"},
		{"an account in the URL", "https://root:" + bmctest.Password + "@192.0.2.7", "not the URL"},
		{"a path", "https://192.0.2.7/redfish/v1/Systems/1", "not a path"},
		{"no host", "https:///redfish/v1", "want http(s)://host[:port]"},
		{"another scheme", "ftp://192.0.2.7", "want http(s)://host[:port]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(ctx, Options{URL: tc.url, User: bmctest.User, Password: bmctest.Password})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
			if strings.Contains(err.Error(), bmctest.Password) {
				t.Fatalf("error %q shows the password", err)
			}
		})
	}

	t.Run("nothing listening", func(t *testing.T) {
		u := fmt.Sprintf("http://127.0.0.1:%d", freePort(t))
		_, err := New(ctx, Options{URL: u, User: bmctest.User, Password: bmctest.Password, Timeout: 2 * time.Second})
		var te *TransportError
		if !errors.As(err, &te) || !strings.Contains(err.Error(), u+"/redfish/v1/") || strings.Contains(err.Error(), bmctest.Password) {
			t.Fatalf("err = %v, want a *TransportError naming %s", err, u)
		}
	})
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
