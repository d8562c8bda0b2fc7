package redfish_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"rackpool/internal/store"
)

// TestDriveWriteReservation: the Connect action takes a drive's write
// reservation for its Holder; a second writer gets 409 naming the holder
// (in the resolution and under Oem.Rackpool) and changes nothing; a
// reader is never refused; Preempt takes the reservation over; Release
// gives it back, by its holder only; the drive's GET shows the writer; a
// request that names no holder is "<account>@<client address>".
func TestDriveWriteReservation(t *testing.T) {
	s := newService(t)
	s.must(http.StatusOK, "POST", "/redfish/v1/Oem/Rackpool/BlockNodes", map[string]any{"Host": "host4", "Endpoint": "127.0.0.1:10809", "Epoch": 1}, admin)
	s.drives.Step(context.Background())
	const d = "/redfish/v1/Oem/Rackpool/Drives/hdd1"
	connect, release := d+"/Actions/Oem/Rackpool.Connect", d+"/Actions/Oem/Rackpool.Release"

	g := s.must(http.StatusOK, "POST", connect, map[string]any{"Rights": "rw", "Holder": "host1/drive-connect/41"}, admin).json(t)
	if g["Holder"] != "host1/drive-connect/41" || g["WriteGeneration"] != 1.0 {
		t.Fatalf("first writer: %v", g)
	}
	if got := dig(t, s.get(d), "WriteReservation", "Holder"); got != "host1/drive-connect/41" {
		t.Fatalf("the drive shows writer %v", got)
	}
	for _, body := range []map[string]any{{"Rights": "rw", "Holder": "host2/drive-connect/7"}, {}} {
		r := s.must(http.StatusConflict, "POST", connect, body, admin)
		if r.errorCode(t) != "Base.1.22.ResourceInUse" || !strings.Contains(r.resolution(t), `"host1/drive-connect/41"`) ||
			!strings.Contains(r.resolution(t), "Preempt") {
			t.Fatalf("second writer %v: %s", body, r.body)
		}
		info := dig(t, r.json(t), "error", "@Message.ExtendedInfo").([]any)[0]
		if got := dig(t, info, "Oem", "Rackpool", "WriteReservation", "Holder"); got != "host1/drive-connect/41" {
			t.Errorf("the refusal's Oem names %v", got)
		}
	}
	if got := dig(t, s.get(d), "WriteReservation", "Generation"); got != 1.0 {
		t.Fatalf("a refused writer changed the reservation: generation %v", got)
	}
	ro := s.must(http.StatusOK, "POST", connect, map[string]any{"Rights": "r"}, admin).json(t)
	if _, ok := ro["Holder"]; ok {
		t.Errorf("a reader's grant names a holder: %v", ro)
	}
	s.must(http.StatusBadRequest, "POST", connect, map[string]any{"Rights": "r", "Preempt": true}, admin)
	s.must(http.StatusBadRequest, "POST", connect, map[string]any{"Rights": "rw", "Holder": ""}, admin)

	p := s.must(http.StatusOK, "POST", connect, map[string]any{"Rights": "rw", "Holder": "host2/drive-connect/7", "Preempt": true}, admin).json(t)
	if p["WriteGeneration"] != 2.0 {
		t.Fatalf("preempt: %v", p)
	}
	if !s.auditHas("Administrator", "success", connect) {
		t.Error("the preempt was not audited")
	}
	entries, err := s.store.Audit(context.Background(), store.AuditQuery{User: "Administrator"})
	if err != nil {
		t.Fatal(err)
	}
	if last := entries[len(entries)-1]; !strings.Contains(last.Detail, "host2/drive-connect/7") || !strings.Contains(last.Detail, "preempt") {
		t.Errorf("audit of the preempt: %+v", last)
	}

	// Release: by its holder only.
	if r := s.must(http.StatusConflict, "POST", release, map[string]any{"Holder": "host1/drive-connect/41"}, admin); !strings.Contains(r.resolution(t), "only its holder") {
		t.Errorf("release by another: %s", r.body)
	}
	if got := s.must(http.StatusOK, "POST", release, map[string]any{"Holder": "host2/drive-connect/7"}, admin).json(t)["WriteReservation"]; got != nil {
		t.Fatalf("after the release the drive shows writer %v", got)
	}
	// No holder named: the account at the client's address, for Connect
	// and Release alike.
	g = s.must(http.StatusOK, "POST", connect, map[string]any{}, admin).json(t)
	if g["Holder"] != "Administrator@127.0.0.1" || g["WriteGeneration"] != 4.0 {
		t.Fatalf("default holder: %v", g)
	}
	if got := s.must(http.StatusOK, "POST", release, nil, admin).json(t)["WriteReservation"]; got != nil {
		t.Fatalf("release with the default holder left %v", got)
	}
}
