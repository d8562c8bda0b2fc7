package rf

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
)

func TestMuxUnmatched(t *testing.T) {
	for _, head := range []bool{false, true} {
		m := &Mux{Head: head}
		ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) })
		m.Handle("GET /redfish/v1/Things/{id}", ok)
		m.Handle("DELETE /redfish/v1/Things/{id}", ok)
		for _, tc := range []struct {
			name, method, path string
			status             int
			allow, id          string
		}{
			{"matched", "GET", "/redfish/v1/Things/1", http.StatusTeapot, "", ""},
			{"other method", "PATCH", "/redfish/v1/Things/1", http.StatusMethodNotAllowed, "GET, DELETE", "OperationNotAllowed"},
			{"no such path", "GET", "/redfish/v1/Nothing", http.StatusNotFound, "", "ResourceMissingAtURI"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				w := httptest.NewRecorder()
				r := httptest.NewRequest(tc.method, tc.path, nil)
				if !m.Unmatched(w, r, func(w http.ResponseWriter, p *Problem) { WriteError(w, p) }) {
					m.ServeHTTP(w, r)
				}
				allow := tc.allow
				if head && allow != "" {
					allow = strings.Replace(allow, "GET", "GET, HEAD", 1)
				}
				if w.Code != tc.status || w.Header().Get("Allow") != allow {
					t.Fatalf("%s %s = %d, Allow %q; want %d, %q", tc.method, tc.path, w.Code, w.Header().Get("Allow"), tc.status, allow)
				}
				if tc.id != "" && !strings.Contains(w.Body.String(), `"code": "`+Registry+tc.id+`"`) {
					t.Errorf("body %s, want %s", w.Body, tc.id)
				}
			})
		}
	}
}

func TestTrimSlash(t *testing.T) {
	for in, want := range map[string]string{
		"/redfish/v1/":         "/redfish/v1/",
		"/redfish/v1/Things/":  "/redfish/v1/Things",
		"/redfish/v1/Things//": "/redfish/v1/Things",
		"/redfish/v1/Things":   "/redfish/v1/Things",
	} {
		r := httptest.NewRequest("GET", in, nil)
		if TrimSlash(r); r.URL.Path != want {
			t.Errorf("TrimSlash(%q) = %q, want %q", in, r.URL.Path, want)
		}
	}
}

func TestLimitBody(t *testing.T) {
	w := httptest.NewRecorder()
	r := httptest.NewRequest("POST", "/redfish/v1/Things", bytes.NewReader(make([]byte, 100)))
	if p := LimitBody(w, r, 10); p == nil || p.Status != http.StatusRequestEntityTooLarge || w.Header().Get("Connection") != "close" {
		t.Fatalf("an announced oversized body: %v, Connection %q", p, w.Header().Get("Connection"))
	}
	w = httptest.NewRecorder()
	r = httptest.NewRequest("POST", "/redfish/v1/Things", bytes.NewReader(make([]byte, 100)))
	r.ContentLength = -1 // not announced: found out while reading
	if p := LimitBody(w, r, 10); p != nil {
		t.Fatalf("a body of unknown length refused: %v", p)
	}
	var v map[string]any
	if p, ok := Decode(r, &v, 10).(*Problem); !ok || p.Status != http.StatusRequestEntityTooLarge {
		t.Fatalf("decoding past the limit: %v", p)
	}
	// What the handler did not read is drained from beneath the limit.
	raw := r.Body.(*limitedBody).raw.(io.ReadCloser)
	DrainOversized(w, r.Body)
	if n, _ := raw.Read(make([]byte, 1)); n != 0 || w.Header().Get("Connection") != "close" {
		t.Errorf("the body was not drained (Connection %q)", w.Header().Get("Connection"))
	}
}

func TestRecover(t *testing.T) {
	var logged bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logged, nil))
	r := httptest.NewRequest("GET", "/redfish/v1", nil)
	var answered any
	func() {
		defer Recover(log, r, func(v any) { answered = v }, "request_id", "abc")
		panic("secret detail")
	}()
	if answered != "secret detail" || !strings.Contains(logged.String(), "request_id=abc") || !strings.Contains(logged.String(), "secret detail") {
		t.Fatalf("answered %v, logged %s", answered, logged.String())
	}
	func() {
		defer func() {
			if v := recover(); v != http.ErrAbortHandler {
				t.Errorf("ErrAbortHandler became %v", v)
			}
		}()
		defer Recover(log, r, func(any) { t.Error("ErrAbortHandler answered") })
		panic(http.ErrAbortHandler)
	}()
	func() {
		defer Recover(log, r, func(any) { t.Error("answered without a panic") })
	}()
}

func TestErrorDocument(t *testing.T) {
	first := PropertyMissing("UserName") // RelatedProperties
	first.Oem = map[string]any{"Rackpool": map[string]any{"Hint": "x"}}
	second := New(http.StatusConflict, "Rackpool.1.0.PortBusy", "busy") // none of them
	w := httptest.NewRecorder()
	WriteError(w, first, second)
	if w.Code != http.StatusBadRequest || w.Header().Get("OData-Version") != "4.0" {
		t.Fatalf("status %d, headers %v", w.Code, w.Header())
	}
	var doc struct {
		Error struct {
			Code    string           `json:"code"`
			Message string           `json:"message"`
			Info    []map[string]any `json:"@Message.ExtendedInfo"`
		} `json:"error"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Error.Code != first.ID || doc.Error.Message != first.Text || len(doc.Error.Info) != 2 {
		t.Fatalf("%s", w.Body)
	}
	if got := doc.Error.Info[0]["RelatedProperties"]; !reflect.DeepEqual(got, []any{"#/UserName"}) {
		t.Errorf("RelatedProperties %v", got)
	}
	if doc.Error.Info[0]["Oem"] == nil {
		t.Error("no Oem")
	}
	for _, k := range []string{"RelatedProperties", "Resolution", "Oem"} {
		if _, ok := doc.Error.Info[1][k]; ok {
			t.Errorf("second entry has %s: %v", k, doc.Error.Info[1])
		}
	}
	if args, ok := doc.Error.Info[1]["MessageArgs"].([]any); !ok || len(args) != 0 {
		t.Errorf("MessageArgs %v, want []", doc.Error.Info[1]["MessageArgs"])
	}
	empty := New(http.StatusBadRequest, Registry+"GeneralError", "x")
	empty.Related = []string{}
	if _, ok := empty.Info()["RelatedProperties"]; !ok {
		t.Error("an empty Related list is not sent")
	}
}

func TestRecorder(t *testing.T) {
	var rec Recorder
	rec.Header().Set("ETag", `"1"`)
	WriteJSON(&rec, http.StatusCreated, map[string]int{"a": 1})
	rec.WriteHeader(http.StatusTeapot) // too late: the first status stays
	w := httptest.NewRecorder()
	w.Header().Set("ETag", "old")
	rec.Replay(w)
	if w.Code != http.StatusCreated || w.Header().Get("ETag") != `"1"` || w.Header().Get("OData-Version") != "4.0" || w.Body.String() != "{\n  \"a\": 1\n}\n" {
		t.Fatalf("replayed %d %v %q", w.Code, w.Header(), w.Body)
	}
	var bodyOnly Recorder
	_, _ = bodyOnly.Write([]byte("x"))
	var empty Recorder
	for _, tc := range []struct {
		rec  *Recorder
		want int
	}{{&bodyOnly, http.StatusOK}, {&empty, http.StatusOK}} {
		w := httptest.NewRecorder()
		tc.rec.Replay(w)
		if w.Code != tc.want {
			t.Errorf("replayed %d, want %d", w.Code, tc.want)
		}
	}
}

func TestPolicyWrap(t *testing.T) {
	type key struct{}
	var failed []error
	p := Policy{
		Admit: func(r *http.Request, pattern string, priv Privilege) (*http.Request, error) {
			if priv != Public && r.Header.Get("X-Auth-Token") != "tok" {
				return r, New(http.StatusUnauthorized, Registry+"NoValidSession", "no session")
			}
			return r.WithContext(context.WithValue(r.Context(), key{}, pattern)), nil
		},
		Fail: func(w http.ResponseWriter, r *http.Request, err error) {
			failed = append(failed, err)
			var p *Problem
			if !errors.As(err, &p) {
				p = New(http.StatusInternalServerError, Registry+"InternalError", "internal")
			}
			WriteError(w, p)
		},
	}
	var got []string
	h := p.Wrap("POST /redfish/v1/Things", Login, func(w http.ResponseWriter, r *http.Request) error {
		got = append(got, r.Context().Value(key{}).(string))
		var v map[string]any
		if err := Decode(r, &v, MaxBody); err != nil {
			return err
		}
		if v["fail"] == true {
			return errors.New("secret")
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	})
	for _, tc := range []struct {
		name, token, body string
		length            int64
		status            int
	}{
		{"refused", "", `{}`, -1, http.StatusUnauthorized},
		{"served", "tok", `{}`, -1, http.StatusNoContent},
		{"handler error", "tok", `{"fail": true}`, -1, http.StatusInternalServerError},
		{"announced too large", "tok", `{}`, MaxBody + 1, http.StatusRequestEntityTooLarge},
		{"found too large", "tok", `{"x": "` + strings.Repeat("y", MaxBody) + `"}`, -1, http.StatusRequestEntityTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			failed, got = nil, nil
			r := httptest.NewRequest("POST", "/redfish/v1/Things", strings.NewReader(tc.body))
			r.ContentLength = tc.length
			r.Header.Set("X-Auth-Token", tc.token)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tc.status || w.Header().Get("Cache-Control") != "no-cache" {
				t.Fatalf("%d, Cache-Control %q; want %d", w.Code, w.Header().Get("Cache-Control"), tc.status)
			}
			if served := len(got) > 0; served != (tc.status != http.StatusUnauthorized && tc.length < 0) {
				t.Errorf("handler ran: %v", served)
			}
			if (tc.status >= 400) != (len(failed) == 1) {
				t.Errorf("Fail called with %v", failed)
			}
			if strings.Contains(w.Body.String(), "secret") {
				t.Errorf("internal detail answered: %s", w.Body)
			}
		})
	}
}

func TestDrainOversizedOnce(t *testing.T) {
	w := httptest.NewRecorder()
	body := strings.NewReader(strings.Repeat("x", 100))
	DrainOversized(w, body)
	if body.Len() != 0 || w.Header().Get("Connection") != "close" {
		t.Fatalf("left %d bytes, Connection %q", body.Len(), w.Header().Get("Connection"))
	}
	rest := strings.NewReader("more")
	DrainOversized(w, rest)
	if rest.Len() != 4 {
		t.Error("drained a second time")
	}
}
