package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// oversizedScript posts an oversized body with Python's urllib and with
// requests, as scripts and the DMTF redfish library do: both write the
// whole body before they read the answer.
const oversizedScript = `
import base64, json, sys, urllib.error, urllib.request
import requests
url, user, pw, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
body = b'{"Name": "' + b"x" * n + b'"}'
auth = "Basic " + base64.b64encode((user + ":" + pw).encode()).decode()
req = urllib.request.Request(url + "/redfish/v1/Systems", data=body, method="POST",
                             headers={"Content-Type": "application/json", "Authorization": auth})
try:
    urllib.request.urlopen(req)
    print("urllib 2xx")
except urllib.error.HTTPError as e:
    print("urllib", e.code, json.load(e)["error"]["code"])
r = requests.post(url + "/redfish/v1/Systems", data=body, auth=(user, pw), headers={"Content-Type": "application/json"})
print("requests", r.status_code, r.json()["error"]["code"])
`

// TestOversizedBodyAnswers413: a body over the limit gets a readable 413
// with a Redfish error body from every common client — Python urllib and
// requests, curl, Go — instead of a connection reset, and changes nothing.
func TestOversizedBodyAnswers413(t *testing.T) {
	skipShort(t)
	py := pythonWithRedfish(t)
	srv := startDefault(t)
	const want = "413 Base.1.22.PayloadTooLarge"
	for _, n := range []int{2 << 20, 8 << 20} {
		out, err := exec.Command(py, "-c", oversizedScript, srv.url, "Administrator", password, strconv.Itoa(n)).CombinedOutput()
		if err != nil {
			t.Fatalf("%d bytes from Python: %v\n%s", n, err, out)
		}
		for _, client := range []string{"urllib", "requests"} {
			if !strings.Contains(string(out), client+" "+want) {
				t.Errorf("%d bytes from %s:\n%s", n, client, out)
			}
		}

		body := append(append([]byte(`{"Name": "`), bytes.Repeat([]byte("x"), n)...), `"}`...)
		file := filepath.Join(t.TempDir(), "body.json")
		if err := os.WriteFile(file, body, 0o644); err != nil {
			t.Fatal(err)
		}
		curl, err := exec.Command("curl", "-sS", "-u", "Administrator:"+password, "-H", "Content-Type: application/json",
			"-H", "Expect:", "--data-binary", "@"+file, srv.url+"/redfish/v1/Systems").CombinedOutput()
		if err != nil || !strings.Contains(string(curl), "Base.1.22.PayloadTooLarge") {
			t.Errorf("%d bytes from curl: %v\n%.400s", n, err, curl)
		}

		req, err := http.NewRequest("POST", srv.url+"/redfish/v1/Systems", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.SetBasicAuth("Administrator", password)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%d bytes from Go: %v", n, err)
		}
		var e struct {
			Error struct{ Code string } `json:"error"`
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge || json.Unmarshal(data, &e) != nil || e.Error.Code != "Base.1.22.PayloadTooLarge" {
			t.Errorf("%d bytes from Go: %d %.300s", n, resp.StatusCode, data)
		}
	}
	if code, body := srv.request("GET", "/redfish/v1/Systems", "", true); code != 200 || strings.Contains(body, "xxxx") {
		t.Errorf("after the oversized requests: %d %.300s", code, body)
	}
	if systems := hostBlocks(t, srv); systems != "" {
		t.Errorf("oversized requests composed something: %s", systems)
	}
}
