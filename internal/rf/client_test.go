package rf

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"testing"
)

func TestParseError(t *testing.T) {
	for _, tc := range []struct {
		name string
		body string
		want ErrorBody
		ok   bool
	}{
		{"code and message", `{"error": {"code": "Base.1.22.GeneralError", "message": "it failed"}}`,
			ErrorBody{Code: "Base.1.22.GeneralError", Message: "it failed"}, true},
		{"extended info, in order", `{"error": {"code": "Base.1.22.GeneralError", "message": "see ExtendedInfo",
			"@Message.ExtendedInfo": [{"MessageId": "Base.1.22.PropertyMissing", "Message": "no ResetType"},
			{"MessageId": "Rackpool.1.0.PortBusy", "Message": "busy", "Severity": "Critical"}]}}`,
			ErrorBody{Code: "Base.1.22.GeneralError", Message: "see ExtendedInfo", Info: []Message{
				{MessageID: "Base.1.22.PropertyMissing", Message: "no ResetType"},
				{MessageID: "Rackpool.1.0.PortBusy", Message: "busy"},
			}}, true},
		{"extended info without a code", `{"error": {"@Message.ExtendedInfo": [{"MessageId": "Base.1.22.ResourceNotFound"}]}}`,
			ErrorBody{Info: []Message{{MessageID: "Base.1.22.ResourceNotFound"}}}, true},
		{"message alone is not a Redfish error", `{"error": {"message": "nope"}}`, ErrorBody{}, false},
		{"empty extended info", `{"error": {"@Message.ExtendedInfo": []}}`, ErrorBody{}, false},
		{"extended info of the wrong type", `{"error": {"code": "X", "@Message.ExtendedInfo": "no"}}`, ErrorBody{}, false},
		{"another JSON document", `{"Members": []}`, ErrorBody{}, false},
		{"not JSON", `<html>502 Bad Gateway</html>`, ErrorBody{}, false},
		{"nested too deep", `{"error": {"code": "X", "message": ` + strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + "}}", ErrorBody{}, false},
		{"empty", ``, ErrorBody{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := ParseError([]byte(tc.body))
			if ok != tc.ok || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ParseError = %+v, %v; want %+v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestQuoteBody(t *testing.T) {
	long := strings.Repeat("x", 300)
	for _, tc := range []struct{ body, want string }{
		{"", ""},
		{" \n\t ", ""},
		{"  gateway down\n", `body: "gateway down"`},
		{`say "hi"`, `body: "say \"hi\""`},
		{long, fmt.Sprintf("body: %q", long[:200]+"…")},
	} {
		if got := QuoteBody([]byte(tc.body)); got != tc.want {
			t.Errorf("QuoteBody(%q) = %q, want %q", tc.body, got, tc.want)
		}
	}
}

func TestReplyDecode(t *testing.T) {
	type res struct {
		ID      string `json:"Id"`
		Members []struct {
			ID string `json:"@odata.id"`
		} `json:"Members"`
		Status struct {
			Health string `json:"Health"`
		} `json:"Status"`
		Enabled bool           `json:"Enabled"`
		Count   int            `json:"Count"`
		Oem     map[string]any `json:"Oem"`
	}
	const u = "https://bmc.test/redfish/v1/Systems/1"
	for _, tc := range []struct {
		name   string
		status int
		body   string
		want   string // "" for success
	}{
		{"good", 200, `{"Id": "1", "Members": [{"@odata.id": "/a"}], "Status": {"Health": "OK"}}`, ""},
		{"empty body", 200, ``, "GET " + u + ": 200 with an empty body, want JSON"},
		{"malformed", 200, `{"Id": `, "GET " + u + ": malformed JSON at byte 7: unexpected end of JSON input"},
		{"syntax error inside", 200, `{"Id": x}`, "GET " + u + ": malformed JSON at byte 8: invalid character 'x' looking for beginning of value"},
		{"a string wanted", 200, `{"Id": 3}`, "GET " + u + ": property Id is a JSON number, want a string"},
		{"an array wanted", 200, `{"Members": {"@odata.id": "/a"}}`, "GET " + u + ": property Members is a JSON object, want an array"},
		{"a nested path", 200, `{"Status": {"Health": 3}}`, "GET " + u + ": property Status.Health is a JSON number, want a string"},
		{"in an array", 200, `{"Members": [{"@odata.id": 1}]}`, "GET " + u + ": property Members.@odata.id is a JSON number, want a string"},
		{"an object wanted", 200, `{"Status": "OK"}`, "GET " + u + ": property Status is a JSON string, want an object"},
		{"a map wanted", 200, `{"Oem": []}`, "GET " + u + ": property Oem is a JSON array, want an object"},
		{"a boolean wanted", 200, `{"Enabled": "yes"}`, "GET " + u + ": property Enabled is a JSON string, want a boolean"},
		{"a number wanted", 200, `{"Count": true}`, "GET " + u + ": property Count is a JSON bool, want a number"},
		{"the document", 200, `[]`, "GET " + u + ": property (the document) is a JSON array, want an object"},
		{"nested too deep", 200, `{"Oem":` + strings.Repeat(`{"a":`, 100000) + "1" + strings.Repeat("}", 100000) + "}",
			"GET " + u + ": JSON nests deeper than 64 levels of objects and arrays (at byte 322)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Reply{Method: http.MethodGet, URL: u, Status: tc.status, Body: []byte(tc.body)}
			var out res
			err := r.Decode(&out)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Decode = %v", err)
			case tc.want != "" && (err == nil || err.Error() != tc.want):
				t.Fatalf("Decode = %v\nwant    %s", err, tc.want)
			}
		})
	}
	t.Run("not a pointer", func(t *testing.T) {
		r := &Reply{Method: http.MethodPost, URL: u, Status: 201, Body: []byte(`{}`)}
		if err := r.Decode(struct{}{}); err == nil || !strings.HasPrefix(err.Error(), "POST "+u+": bad JSON: ") {
			t.Fatalf("Decode into a non-pointer = %v", err)
		}
	})
}

func TestResolve(t *testing.T) {
	base := &url.URL{Scheme: "https", Host: "bmc.test:8443"}
	for _, tc := range []struct{ ref, want, err string }{
		{"/redfish/v1/Systems/1", "https://bmc.test:8443/redfish/v1/Systems/1", ""},
		{"https://bmc.test:8443/redfish/v1/TaskService/Tasks/3", "https://bmc.test:8443/redfish/v1/TaskService/Tasks/3", ""},
		{"https://other.test/redfish/v1/x", "", "link https://other.test/redfish/v1/x points to another host than the BMC"},
		{"http://bmc.test:8443/redfish/v1/x", "", "link http://bmc.test:8443/redfish/v1/x points to another host than the BMC"},
		{"https://u:secret@other.test/x", "", "link https://u:xxxxx@other.test/x points to another host than the BMC"},
		{"//other.test/x", "", "link //other.test/x points to another host than the BMC"},
		{"redfish/v1", "", `link "redfish/v1" is not an absolute path`},
		{"%zz", "", `bad link "%zz": `},
	} {
		got, err := Resolve(base, tc.ref, "the BMC")
		switch {
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("Resolve(%q) = %q, %v; want %q", tc.ref, got, err, tc.want)
		case tc.err != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.err)):
			t.Errorf("Resolve(%q) = %q, %v; want an error %q", tc.ref, got, err, tc.err)
		}
	}
}

func TestNewRequest(t *testing.T) {
	req, err := NewRequest(context.Background(), http.MethodPatch, "https://bmc.test/redfish/v1/Systems/1", []byte(`{}`), http.Header{"If-Match": {`"e1"`}})
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"Accept": "application/json", "OData-Version": "4.0", "Content-Type": "application/json", "If-Match": `"e1"`} {
		if got := req.Header.Get(k); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	req, err = NewRequest(context.Background(), http.MethodGet, "https://bmc.test/redfish/v1/", nil, nil)
	if err != nil || req.Header.Get("Content-Type") != "" || req.Body != nil {
		t.Errorf("a GET without a body: %v, Content-Type %q, body %v", err, req.Header.Get("Content-Type"), req.Body)
	}
	if _, err := NewRequest(context.Background(), "BAD METHOD", "https://bmc.test/", nil, nil); err == nil || !strings.HasPrefix(err.Error(), "BAD METHOD https://bmc.test/: ") {
		t.Errorf("a bad method: %v", err)
	}
}

// serve is a test server and an http.Client that follows redirects only
// within it.
func serve(t *testing.T, h http.HandlerFunc) (*httptest.Server, *http.Client, *url.URL) {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	base, _ := url.Parse(srv.URL)
	return srv, &http.Client{CheckRedirect: SameHost(base, "the manager")}, base
}

func TestSend(t *testing.T) {
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer other.Close()
	srv, hc, base := serve(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/moved":
			http.Redirect(w, r, "/redfish/v1/", http.StatusTemporaryRedirect)
		case "/elsewhere":
			http.Redirect(w, r, other.URL+"/redfish/v1/", http.StatusFound)
		case "/loop":
			http.Redirect(w, r, "/loop", http.StatusFound)
		case "/big":
			_, _ = w.Write([]byte(strings.Repeat(" ", 2<<20+1)))
		case "/cut":
			w.Header().Set("Content-Length", "100")
			_, _ = w.Write([]byte("{"))
		default:
			w.Header().Set("ETag", `"e1"`)
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{"Id": "x"}`))
		}
	})
	send := func(path string) (*Reply, error, error) {
		u := srv.URL + path
		req, err := NewRequest(context.Background(), http.MethodGet, u, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		var failedWith error
		r, err := Send(hc, req, u, 2<<20, func(err error) error {
			failedWith = err
			return fmt.Errorf("classified: %w", err)
		})
		return r, err, failedWith
	}

	r, err, _ := send("/redfish/v1/")
	if err != nil || r.Method != "GET" || r.URL != srv.URL+"/redfish/v1/" || r.Status != http.StatusCreated || r.Header.Get("ETag") != `"e1"` || string(r.Body) != `{"Id": "x"}` {
		t.Errorf("Send = %+v, %v", r, err)
	}
	if r, err, _ := send("/moved"); err != nil || r.URL != srv.URL+"/redfish/v1/" {
		t.Errorf("after a same-host redirect: %+v, %v; want the URL that answered", r, err)
	}
	_, err, failed := send("/elsewhere")
	var re *RedirectError
	if !errors.As(failed, &re) || err == nil || !strings.Contains(err.Error(), "classified: ") ||
		!strings.Contains(err.Error(), "refusing redirect from "+srv.URL+"/elsewhere to "+other.URL+"/redfish/v1/: not the manager "+base.String()) {
		t.Errorf("a redirect to another host: %v (failed with %v)", err, failed)
	}
	if _, err, failed := send("/loop"); !errors.As(failed, &re) || !strings.Contains(err.Error(), "more than 5 redirects from "+srv.URL+"/loop") {
		t.Errorf("a redirect loop: %v", err)
	}
	var tl *TooLargeError
	if _, err, failed := send("/big"); failed != nil || !errors.As(err, &tl) || tl.Limit != 2<<20 || err.Error() != "GET "+srv.URL+"/big: answer larger than 2 MiB" {
		t.Errorf("a body over the limit: %v (failed with %v)", err, failed)
	}
	if _, err, failed := send("/cut"); failed == nil || !strings.HasPrefix(err.Error(), "classified: reading the answer (200): ") {
		t.Errorf("a body cut short: %v", err)
	}
}

func TestUntrusted(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	_, err := http.Get(srv.URL) // the test server's certificate is not in the system's roots
	if err == nil || !Untrusted(err) {
		t.Errorf("Untrusted(%v) = false", err)
	}
	if _, err := srv.Client().Get(srv.URL); err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{
		x509.UnknownAuthorityError{},
		fmt.Errorf("wrapped: %w", x509.HostnameError{Host: "bmc.test"}),
		x509.CertificateInvalidError{Reason: x509.Expired},
	} {
		if !Untrusted(err) {
			t.Errorf("Untrusted(%v) = false", err)
		}
	}
	for _, err := range []error{errors.New("connection refused"), context.DeadlineExceeded, &RedirectError{"x"}} {
		if Untrusted(err) {
			t.Errorf("Untrusted(%v) = true", err)
		}
	}
}

func TestLoopback(t *testing.T) {
	for host, want := range map[string]bool{
		"localhost": true, "127.0.0.1": true, "127.1.2.3": true, "::1": true,
		"bmc.test": false, "10.0.0.1": false, "": false, "localhost.example": false,
	} {
		if got := Loopback(host); got != want {
			t.Errorf("Loopback(%q) = %v, want %v", host, got, want)
		}
	}
}

func TestErrorText(t *testing.T) {
	const head = "PATCH https://bmc.test/redfish/v1/Systems/1: 412 Precondition Failed"
	for _, tc := range []struct{ id, msg, want string }{
		{"", "", head},
		{"Base.1.22.PreconditionFailed", "", head + " (Base.1.22.PreconditionFailed)"},
		{"", `body: "x"`, head + `: body: "x"`},
		{"Base.1.22.PreconditionFailed", "the ETag does not match", head + " (Base.1.22.PreconditionFailed): the ETag does not match"},
	} {
		if got := ErrorText(head, tc.id, tc.msg); got != tc.want {
			t.Errorf("ErrorText(%q, %q) = %q, want %q", tc.id, tc.msg, got, tc.want)
		}
	}
}

func TestBusy(t *testing.T) {
	for status, want := range map[int]bool{
		503: true, 429: true, 502: true, 504: true,
		200: false, 202: false, 400: false, 404: false, 409: false, 412: false, 500: false, 501: false,
	} {
		if got := Busy(status); got != want {
			t.Errorf("Busy(%d) = %v, want %v", status, got, want)
		}
	}
}

func TestTooLargeError(t *testing.T) {
	for _, tc := range []struct {
		limit int
		want  string
	}{
		{4 << 20, "answer larger than 4 MiB"},
		{1000, "answer larger than 1000 bytes"},
		{3<<20 + 1, "answer larger than 3145729 bytes"},
	} {
		if got := (&TooLargeError{Limit: tc.limit}).Error(); got != tc.want {
			t.Errorf("limit %d: %q, want %q", tc.limit, got, tc.want)
		}
	}
}

func TestSession(t *testing.T) {
	var got struct{ UserName, Password string }
	if err := json.Unmarshal(LoginBody("admin", `p"w`), &got); err != nil || got.UserName != "admin" || got.Password != `p"w` {
		t.Fatalf("LoginBody: %+v, %v", got, err)
	}
	r := &Reply{Header: http.Header{"X-Auth-Token": {"tok"}, "Location": {SessionsPath + "/7"}}}
	if tok, loc := r.Session(); tok != "tok" || loc != SessionsPath+"/7" {
		t.Errorf("Session = %q, %q", tok, loc)
	}
	if tok, loc := (&Reply{Header: http.Header{}}).Session(); tok != "" || loc != "" {
		t.Errorf("Session of an answer without them = %q, %q", tok, loc)
	}
}

func TestHeadline(t *testing.T) {
	for _, tc := range []struct {
		name     string
		body     ErrorBody
		id, text string
	}{
		{"code only", ErrorBody{Code: "Base.1.22.GeneralError", Message: "m"}, "Base.1.22.GeneralError", "m"},
		{"first entry", ErrorBody{Code: "c", Message: "m", Info: []Message{{MessageID: "a", Message: "x"}, {MessageID: "b", Message: "y"}}}, "a", "x"},
		{"entry without id", ErrorBody{Code: "c", Message: "m", Info: []Message{{Message: "x"}}}, "c", "x"},
		{"entry without message", ErrorBody{Code: "c", Message: "m", Info: []Message{{MessageID: "a"}}}, "a", "m"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if id, text := tc.body.Headline(); id != tc.id || text != tc.text {
				t.Errorf("Headline = %q, %q; want %q, %q", id, text, tc.id, tc.text)
			}
		})
	}
}
