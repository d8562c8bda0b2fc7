package node

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"testing"

	"rackpool/api"
	"rackpool/internal/hba"
)

// TestNewPathWaitsForADriveBetweenOwners: while the service answers 503
// (the drive is being failed over or moved), drive connect asks again;
// any other answer ends the wait at once.
func TestNewPathWaitsForADriveBetweenOwners(t *testing.T) {
	calls := 0
	resolve := hba.ResolverFunc(func(context.Context, string) (hba.Path, error) {
		calls++
		if calls <= 2 {
			return hba.Path{}, &api.Error{Status: http.StatusServiceUnavailable, Message: "drive ssd1 is Unassigned"}
		}
		return hba.Path{}, &api.Error{Status: http.StatusNotFound, Message: "no pooled drive"}
	})
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	_, err := newPath(context.Background(), hba.Options{Drive: "ssd1", Resolver: resolve}, log)
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Status != http.StatusNotFound || calls != 3 {
		t.Fatalf("newPath = %v after %d resolves, want the 404 after two 503s", err, calls)
	}
}
