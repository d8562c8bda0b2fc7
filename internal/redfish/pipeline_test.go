package redfish_test

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"

	"rackpool/internal/redfish"
	"rackpool/internal/tenancy"
)

// TestOversizedBodyAudited: a change refused for its size is audited,
// whether its size was announced (refused before the handler runs) or
// found while the handler read it (chunked), and the whole body is read
// so the client sees the 413.
func TestOversizedBodyAudited(t *testing.T) {
	s := newService(t)
	body := `{"Name": "` + strings.Repeat("x", redfish.MaxBody) + `"}`
	for _, announced := range []bool{true, false} {
		var rd io.Reader = strings.NewReader(body)
		if !announced {
			rd = io.NopCloser(rd) // no length: sent chunked
		}
		req, err := http.NewRequest("POST", s.srv.URL+"/redfish/v1/Systems", rd)
		if err != nil {
			t.Fatal(err)
		}
		req.SetBasicAuth(tenancy.AdminUser, password)
		resp, err := s.srv.Client().Do(req)
		if err != nil {
			t.Fatalf("announced %v: %v", announced, err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge || !bytes.Contains(data, []byte("Base.1.22.PayloadTooLarge")) {
			t.Fatalf("announced %v: status %d: %s", announced, resp.StatusCode, data)
		}
	}
	n := 0
	for _, m := range list(t, s.get("/redfish/v1/Managers/rackpool/LogServices/Audit/Entries")["Members"]) {
		o := dig(t, m, "Oem", "Rackpool").(map[string]any)
		if o["Method"] == "POST" && o["Target"] == "/redfish/v1/Systems" && o["Outcome"] == "failure" && o["Status"] == float64(413) {
			n++
		}
	}
	if n != 2 {
		t.Errorf("%d audit entries of a 413, want 2", n)
	}
}
