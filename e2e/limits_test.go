package e2e

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"rackpool/internal/childproc"
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
		cmd := childproc.Command(py, "-c", oversizedScript, srv.url, "Administrator", password, strconv.Itoa(n))
		cmd.Env = srv.env() // SSL_CERT_FILE for urllib, REQUESTS_CA_BUNDLE for requests
		out, err := cmd.CombinedOutput()
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
		curl, err := childproc.Command("curl", "-sS", "--cacert", srv.ca, "-u", "Administrator:"+password, "-H", "Content-Type: application/json",
			"-H", "Expect:", "--data-binary", "@"+file, srv.url+"/redfish/v1/Systems").CombinedOutput()
		if err != nil || !strings.Contains(string(curl), "Base.1.22.PayloadTooLarge") {
			t.Errorf("%d bytes from curl: %v\n%.400s", n, err, curl)
		}

		req, err := http.NewRequest("POST", srv.url+"/redfish/v1/Systems", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.SetBasicAuth("Administrator", password)
		resp, err := srv.http.Do(req)
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

// TestSlowClientsAreCut: a client that trickles its headers or its body,
// or keeps an idle connection, is disconnected after the configured
// timeout, and others are served meanwhile.
func TestSlowClientsAreCut(t *testing.T) {
	skipShort(t)
	srv := start(t, t.TempDir(), []string{"RACKPOOL_ADMIN_PASSWORD=" + password},
		"--header-timeout", "400ms", "--body-timeout", "800ms", "--idle-timeout", "400ms")
	// cut reports how long the server took to hang up on a connection
	// that writes one byte of rest every 50 ms after first.
	cut := func(first, rest string) time.Duration {
		t.Helper()
		c := srv.dial()
		defer c.Close()
		start := time.Now()
		if _, err := io.WriteString(c, first); err != nil {
			t.Fatal(err)
		}
		closed := make(chan struct{})
		go func() { _, _ = io.Copy(io.Discard, c); close(closed) }()
		for i := 0; i < len(rest); i++ {
			select {
			case <-closed:
				return time.Since(start)
			case <-time.After(50 * time.Millisecond):
			}
			if _, err := c.Write([]byte{rest[i]}); err != nil {
				return time.Since(start)
			}
			// Meanwhile others are served.
			if i == 3 {
				if code, _ := srv.request("GET", "/redfish/v1/Systems", "", true); code != 200 {
					t.Errorf("a normal request while a slow client trickles: %d", code)
				}
			}
		}
		select {
		case <-closed:
			return time.Since(start)
		case <-time.After(10 * time.Second):
			t.Fatalf("the server kept a slow connection open for 10 s")
			return 0
		}
	}
	headers := "Host: x\r\n" + strings.Repeat("X-Slow: 1\r\n", 40) + "\r\n"
	if d := cut("GET /redfish/v1 HTTP/1.1\r\n", headers); d > 3*time.Second {
		t.Errorf("trickled headers cut after %v, want about 400 ms", d)
	}
	auth := "Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte("Administrator:"+password)) + "\r\n"
	if d := cut("POST /redfish/v1/Systems HTTP/1.1\r\nHost: x\r\n"+auth+"Content-Type: application/json\r\nContent-Length: 400\r\n\r\n", strings.Repeat(" ", 400)); d > 3*time.Second {
		t.Errorf("trickled body cut after %v, want about 800 ms", d)
	}
	// An idle keep-alive connection is closed after the idle timeout.
	c := srv.dial()
	defer c.Close()
	if _, err := io.WriteString(c, "GET /redfish/v1 HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	rd := bufio.NewReader(c)
	resp, err := http.ReadResponse(rd, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("first request on the idle connection: %v %v", resp, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	start := time.Now()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := rd.ReadByte(); err == nil || time.Since(start) > 3*time.Second {
		t.Errorf("idle connection: read %v after %v, want EOF after about 400 ms", err, time.Since(start))
	}
	// Bad values are refused before anything starts.
	out, err := childproc.Command(binary, "serve", "--idle-timeout", "0s", "--data", t.TempDir()).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--idle-timeout must be positive") {
		t.Errorf("serve --idle-timeout 0s: %v\n%s", err, out)
	}
}

// openSockets counts the sockets a process has open (its listener
// included).
func openSockets(t *testing.T, pid int) int {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if l, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil && strings.HasPrefix(l, "socket:") {
			n++
		}
	}
	return n
}

// TestConnectionLimit holds more idle connections than --max-connections
// allows: the server never has more open, cuts the idle ones at the
// header timeout, and a normal client is served meanwhile.
func TestConnectionLimit(t *testing.T) {
	skipShort(t)
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		t.Skip("no /proc to count sockets")
	}
	const limit, idle = 16, 200
	srv := startDefault(t, "--max-connections", fmt.Sprint(limit), "--header-timeout", "500ms")
	const base = 1 // the listener; start's keep-alive connection counts as a client
	addr := srv.addr
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range idle {
		c, err := net.Dial("tcp", addr) // completes in the kernel's accept queue
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	peak := 0
	done := make(chan int, 1)
	go func() {
		code, _ := srv.request("GET", "/redfish/v1/Systems", "", true)
		done <- code
	}()
	deadline := time.After(60 * time.Second)
	for {
		peak = max(peak, openSockets(t, srv.cmd.Process.Pid)-base)
		select {
		case code := <-done:
			if code != 200 {
				t.Errorf("normal request behind %d idle connections: %d", idle, code)
			}
			if peak > limit {
				t.Errorf("server held %d connections, limit %d", peak, limit)
			}
			if peak < limit-2 {
				t.Errorf("server held at most %d connections of %d idle ones: the limit %d was not reached", peak, idle, limit)
			}
			out, err := childproc.Command(binary, "serve", "--max-connections", "0", "--data", t.TempDir()).CombinedOutput()
			if err == nil || !strings.Contains(string(out), "--max-connections must be at least 1") {
				t.Errorf("serve --max-connections 0: %v\n%s", err, out)
			}
			return
		case <-deadline:
			t.Fatalf("a normal request was not served within 60 s behind %d idle connections (limit %d)", idle, limit)
		case <-time.After(20 * time.Millisecond):
		}
	}
}
