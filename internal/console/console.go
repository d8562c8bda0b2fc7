// Package console serves rackpool's web console at /ui: a single-page
// application built from ui/ (Preact, uPlot) into dist/ and embedded in the
// binary, so serve needs nothing on disk and fetches nothing from
// elsewhere.
//
// The console has no API of its own. It logs in through the Redfish
// SessionService and then reads and changes everything through the same
// Redfish routes as any client, with its session token in the X-Auth-Token
// header; the service decides what the session may see and do. What this
// package adds is only the static files and the headers that keep a page
// holding a token safe: a Content-Security-Policy that allows scripts,
// styles and connections to this origin only, no framing, no sniffing and
// no referrer.
package console

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"time"
)

//go:embed dist
var dist embed.FS

// Prefix is where the console is served.
const Prefix = "/ui/"

// csp allows only this origin: the bundle, its stylesheet, fetches to the
// Redfish API and the event stream. Charts and the topology are SVG and
// canvas drawn by the bundle; data: images are uPlot's.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"font-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

type file struct {
	body  []byte
	ctype string
	etag  string
}

// Handler serves the console under Prefix; "/ui" and "/" redirect to it.
type Handler struct {
	files map[string]file
	mod   time.Time
}

// New loads the embedded files.
func New() (*Handler, error) {
	sub, err := fs.Sub(dist, "dist")
	if err != nil {
		return nil, err
	}
	h := &Handler{files: map[string]file{}, mod: time.Now()}
	err = fs.WalkDir(sub, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(sub, p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		ctype := mime.TypeByExtension(path.Ext(p))
		if ctype == "" {
			ctype = "application/octet-stream"
		}
		h.files[p] = file{body: b, ctype: ctype, etag: `"` + hex.EncodeToString(sum[:12]) + `"`}
		return nil
	})
	return h, err
}

// ServeHTTP serves index.html for the console's root and the files by name.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/" || r.URL.Path == "/ui" {
		http.Redirect(w, r, Prefix, http.StatusFound)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "The console's files are read-only: use GET.", http.StatusMethodNotAllowed)
		return
	}
	name := strings.TrimPrefix(r.URL.Path, Prefix)
	if name == "" {
		name = "index.html"
	}
	f, ok := h.files[name]
	if !ok {
		http.Error(w, "No such file in the console: "+name+". The console starts at "+Prefix+".", http.StatusNotFound)
		return
	}
	hd := w.Header()
	hd.Set("Content-Security-Policy", csp)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("Cross-Origin-Opener-Policy", "same-origin")
	hd.Set("Content-Type", f.ctype)
	hd.Set("ETag", f.etag)
	// Revalidate every time: the files change with the binary, and a 304
	// costs one round trip.
	hd.Set("Cache-Control", "no-cache")
	http.ServeContent(w, r, name, h.mod, bytes.NewReader(f.body))
}

// Mount returns a handler that serves the console under Prefix (and
// redirects "/" and "/ui" to it) and passes every other request to api.
func (h *Handler) Mount(api http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		if p == "/" || p == "/ui" || strings.HasPrefix(p, Prefix) {
			h.ServeHTTP(w, r)
			return
		}
		api.ServeHTTP(w, r)
	})
}
