package api

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestDoRefusesDeepAnswers: an answer nesting deeper than
// jsonlimit.MaxDepth is refused before it is decoded, as an answer and as
// an error body (which then reads as plain text).
func TestDoRefusesDeepAnswers(t *testing.T) {
	deep := `{"Id": ` + strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + "}"
	status := http.StatusOK
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(deep))
	}))
	defer srv.Close()
	c := New(srv.URL, "u", "p")
	c.HTTP = srv.Client()
	var out struct{ Id any }
	_, err := c.Do(context.Background(), "GET", "/redfish/v1/Systems/x", nil, &out)
	if err == nil || !strings.Contains(err.Error(), "JSON nests deeper than 64 levels") {
		t.Fatalf("Do = %v, want the depth refused", err)
	}
	status = http.StatusBadRequest
	_, err = c.Do(context.Background(), "GET", "/redfish/v1/Systems/x", nil, &out)
	var e *Error
	if !errors.As(err, &e) || e.Status != http.StatusBadRequest || e.MessageID != "" {
		t.Fatalf("Do = %#v, want a 400 read as text", err)
	}
}
