package client

import (
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/spf13/cobra"

	"rackpool/cmd/rackpool/internal/cli"
)

// fakeService answers every request with one composed system and records
// what was asked.
type fakeService struct {
	mu   sync.Mutex
	reqs []string // "METHOD PATH BODY"
}

func (f *fakeService) start(t *testing.T) string {
	t.Helper()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.reqs = append(f.reqs, r.Method+" "+r.URL.Path+" "+strings.TrimSpace(string(body)))
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"Id": "sys-1", "Name": "sys-1", "SystemType": "Composed",
			"Oem": map[string]any{"Rackpool": map[string]any{"CompositionState": "Composed", "Host": "host1", "Version": 4}}})
	}))
	t.Cleanup(srv.Close)
	trust(t, srv)
	return srv.URL
}

// trust makes the client verbs trust srv's certificate, with a password.
func trust(t *testing.T, srv *httptest.Server) {
	t.Helper()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("RACKPOOL_PASSWORD", "secret")
	t.Setenv("RACKPOOL_CA_FILE", ca)
}

// stdout runs f and returns what it printed.
func stdout(t *testing.T, f func() error) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stdout
	os.Stdout = w
	done := make(chan string)
	go func() {
		b, _ := io.ReadAll(r)
		done <- string(b)
	}()
	ferr := f()
	os.Stdout = old
	w.Close()
	out := <-done
	if ferr != nil {
		t.Fatalf("%v\n%s", ferr, out)
	}
	return out
}

// TestUpdateVerbsNameTheirAction: shrink asks for Rackpool.Shrink (once
// it sent Expand with Remove, and the audit log said Expand), expand for
// Rackpool.Expand; -q prints the system's ID alone.
func TestUpdateVerbsNameTheirAction(t *testing.T) {
	for _, tc := range []struct {
		name    string
		verb    []string
		args    []string
		request string
		out     string
	}{
		{"shrink", []string{"shrink"}, []string{"sys-1", "gpu2", "hdd1"},
			`POST /redfish/v1/Systems/sys-1/Actions/Oem/Rackpool.Shrink {"Blocks":["gpu2","hdd1"]}`, "sys-1 (sys-1) Composed on host1, version 4"},
		{"shrink quiet", []string{"shrink"}, []string{"-q", "sys-1", "gpu2"},
			`POST /redfish/v1/Systems/sys-1/Actions/Oem/Rackpool.Shrink {"Blocks":["gpu2"]}`, "sys-1\n"},
		{"expand", []string{"expand"}, []string{"sys-1", "--need", "1 fpga", "--quiet"},
			`POST /redfish/v1/Systems/sys-1/Actions/Oem/Rackpool.Expand {"Needs":[{"Kind":"fpga","Count":1}]}`, "sys-1\n"},
		{"compose quiet", []string{"compose"}, []string{"--host", "host1", "-q", "gpu1"},
			`POST /redfish/v1/Systems `, "sys-1\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeService{}
			url := f.start(t)
			out := stdout(t, func() error { return execute(append(append(tc.verb, "--url", url), tc.args...)...) })
			if len(f.reqs) == 0 || !strings.HasPrefix(f.reqs[0], tc.request) {
				t.Errorf("requests %q, want the first to start %q", f.reqs, tc.request)
			}
			if strings.HasSuffix(tc.out, "\n") && out != tc.out || !strings.HasPrefix(out, tc.out) {
				t.Errorf("printed %q, want %q", out, tc.out)
			}
		})
	}
}

// TestTTLMustBePositive: "--ttl -5s" once sent nothing and got the
// service's ten-minute default; a zero or negative --ttl is now refused
// before any request, with an error naming the flag.
func TestTTLMustBePositive(t *testing.T) {
	for _, tc := range []struct {
		name string
		verb []string
		args []string
	}{
		{"drive token", []string{"drive", "token"}, []string{"ssd1"}},
		{"lease", []string{"lease"}, []string{"--size", "1MiB"}},
		{"renew", []string{"renew"}, []string{"lease-1"}},
	} {
		for _, ttl := range []string{"-5s", "0", "0s", "-1ns"} {
			t.Run(tc.name+" "+ttl, func(t *testing.T) {
				f := &fakeService{}
				url := f.start(t)
				err := execute(append(append(tc.verb, "--url", url, "--ttl", ttl), tc.args...)...)
				if err == nil || !strings.Contains(err.Error(), "-ttl") || !strings.Contains(err.Error(), "positive") {
					t.Errorf("--ttl %s: %v, want an error saying the flag must be positive", ttl, err)
				}
				if len(f.reqs) != 0 {
					t.Errorf("--ttl %s sent %q", ttl, f.reqs)
				}
			})
		}
		t.Run(tc.name+" 90s", func(t *testing.T) {
			f := &fakeService{}
			url := f.start(t)
			_ = execute(append(append(tc.verb, "--url", url, "--ttl", "90s"), tc.args...)...) // the fake's answer is no grant
			if len(f.reqs) != 1 || !strings.Contains(f.reqs[0], `"TTLSeconds":90`) {
				t.Errorf("--ttl 90s sent %q, want one request with TTLSeconds 90", f.reqs)
			}
		})
	}
}

// execute runs one command line on a root holding the client verbs, with
// flag errors as usage errors as under rackpool's root, and returns the
// verb's error.
func execute(args ...string) error {
	root := &cobra.Command{Use: "rackpool", SilenceErrors: true, SilenceUsage: true}
	root.SetFlagErrorFunc(cli.FlagUsageError)
	root.AddCommand(BlocksCmd(), ComposeCmd(), ExpandCmd(), ShrinkCmd(), LeaseCmd(), RenewCmd(), DriveCmd())
	root.SetArgs(args)
	root.SetOut(io.Discard)
	root.SetErr(io.Discard)
	return root.Execute()
}

// TestListVerbs: the list verbs print their filtered rows as a table, or
// as JSON with --json.
func TestListVerbs(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		blocks := []map[string]any{
			{"Id": "gpu1", "CompositionStatus": map[string]any{"CompositionState": "Composed", "MaxCompositions": 1, "NumberOfCompositions": 1},
				"Links": map[string]any{"ComputerSystems": []map[string]string{{"@odata.id": "/redfish/v1/Systems/sys-1"}}},
				"Oem":   map[string]any{"Rackpool": map[string]any{"Kind": "gpu", "Model": "V100", "Fabric": "pcie1", "Drawer": "drawer1", "Slot": 2}}},
			{"Id": "hdd1", "CompositionStatus": map[string]any{"CompositionState": "Unused"},
				"Oem": map[string]any{"Rackpool": map[string]any{"Kind": "hdd", "CapacityBytes": 4 << 40}}},
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"Members": blocks})
	}))
	defer srv.Close()
	trust(t, srv)

	out := stdout(t, func() error { return execute("blocks", "--url", srv.URL) })
	want := "BLOCK  KIND  MODEL  CAPACITY  WHERE                STATE     HEALTH  USE  SYSTEMS\n" +
		"gpu1   gpu   V100   -         pcie1/drawer1/slot2  Composed          1/1  sys-1\n" +
		"hdd1   hdd          4096GiB   -                    Unused            0/0  \n"
	if out != want {
		t.Errorf("blocks printed\n%s\nwant\n%s", out, want)
	}
	out = stdout(t, func() error { return execute("blocks", "--kind", "HDD", "--json", "--url", srv.URL) })
	var got []struct {
		ID string `json:"Id"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil || len(got) != 1 || got[0].ID != "hdd1" {
		t.Errorf("blocks --kind HDD --json: %v %+v\n%s", err, got, out)
	}
}
