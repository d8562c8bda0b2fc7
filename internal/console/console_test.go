package console

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestHandler: the console's files with their security headers, the
// redirects to it, and what it refuses; everything else goes to the API.
func TestHandler(t *testing.T) {
	h, err := New()
	if err != nil {
		t.Fatal(err)
	}
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) })
	srv := h.Mount(api)
	do := func(method, path string, hdr ...string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, path, nil)
		for i := 0; i+1 < len(hdr); i += 2 {
			r.Header.Set(hdr[i], hdr[i+1])
		}
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, r)
		return w
	}
	for _, p := range []string{"/", "/ui"} {
		if w := do("GET", p); w.Code != http.StatusFound || w.Header().Get("Location") != Prefix {
			t.Errorf("GET %s: %d to %q, want a redirect to %s", p, w.Code, w.Header().Get("Location"), Prefix)
		}
	}
	w := do("GET", "/ui/")
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `<script type="module" src="/ui/app.js">`) {
		t.Fatalf("GET /ui/: %d %.200s", w.Code, w.Body)
	}
	csp := w.Header().Get("Content-Security-Policy")
	for _, want := range []string{"script-src 'self'", "connect-src 'self'", "frame-ancestors 'none'", "default-src 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("CSP %q lacks %q", csp, want)
		}
	}
	if w.Header().Get("X-Frame-Options") != "DENY" || w.Header().Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("headers %v", w.Header())
	}
	js := do("GET", "/ui/app.js")
	if js.Code != http.StatusOK || !strings.HasPrefix(js.Header().Get("Content-Type"), "text/javascript") || js.Body.Len() < 10000 {
		t.Errorf("GET /ui/app.js: %d %q, %d bytes", js.Code, js.Header().Get("Content-Type"), js.Body.Len())
	}
	if w := do("GET", "/ui/app.js", "If-None-Match", js.Header().Get("ETag")); w.Code != http.StatusNotModified {
		t.Errorf("revalidation with the ETag: %d, want 304", w.Code)
	}
	if w := do("GET", "/ui/../../etc/passwd"); w.Code != http.StatusNotFound && w.Code != http.StatusMovedPermanently {
		t.Errorf("a path outside the console: %d", w.Code)
	}
	if w := do("GET", "/ui/nothing.js"); w.Code != http.StatusNotFound || !strings.Contains(w.Body.String(), "nothing.js") {
		t.Errorf("an unknown file: %d %q", w.Code, w.Body)
	}
	if w := do("POST", "/ui/app.js"); w.Code != http.StatusMethodNotAllowed || w.Header().Get("Allow") != "GET, HEAD" {
		t.Errorf("POST: %d, Allow %q", w.Code, w.Header().Get("Allow"))
	}
	if w := do("GET", "/redfish/v1"); w.Code != http.StatusTeapot {
		t.Errorf("/redfish/v1 did not reach the API: %d", w.Code)
	}
}
