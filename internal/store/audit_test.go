package store

import (
	"errors"
	"testing"
	"time"
)

func TestAuditQueryEffectiveLimit(t *testing.T) {
	tests := []struct {
		limit, want int
	}{
		{0, DefaultAuditLimit},
		{-5, DefaultAuditLimit},
		{1, 1},
		{MaxAuditLimit, MaxAuditLimit},
		{MaxAuditLimit + 1, MaxAuditLimit},
	}
	for _, tt := range tests {
		if got := (AuditQuery{Limit: tt.limit}).EffectiveLimit(); got != tt.want {
			t.Errorf("Limit %d: EffectiveLimit = %d, want %d", tt.limit, got, tt.want)
		}
	}
}

func TestAuditEntryValidate(t *testing.T) {
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		e    AuditEntry
		ok   bool
	}{
		{"success", AuditEntry{Time: now, Outcome: AuditSuccess}, true},
		{"failure", AuditEntry{Time: now, Outcome: AuditFailure}, true},
		{"denied", AuditEntry{Time: now, Outcome: AuditDenied}, true},
		{"earliest year", AuditEntry{Time: time.Date(1678, 1, 1, 0, 0, 0, 0, time.UTC), Outcome: AuditSuccess}, true},
		{"latest year", AuditEntry{Time: time.Date(2261, 12, 31, 0, 0, 0, 0, time.UTC), Outcome: AuditSuccess}, true},
		{"zero time", AuditEntry{Outcome: AuditSuccess}, false},
		{"before 1678", AuditEntry{Time: time.Date(1677, 1, 1, 0, 0, 0, 0, time.UTC), Outcome: AuditSuccess}, false},
		{"after 2262", AuditEntry{Time: time.Date(2263, 1, 1, 0, 0, 0, 0, time.UTC), Outcome: AuditSuccess}, false},
		{"no outcome", AuditEntry{Time: now}, false},
		{"other outcome", AuditEntry{Time: now, Outcome: "error"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.e.Validate()
			if tt.ok != (err == nil) {
				t.Fatalf("Validate = %v, want ok %v", err, tt.ok)
			}
			if err != nil && !errors.Is(err, ErrInvalidAudit) {
				t.Fatalf("Validate = %v, not ErrInvalidAudit", err)
			}
		})
	}
}
