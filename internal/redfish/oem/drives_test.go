package oem

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"rackpool/internal/blocknode"
	"rackpool/internal/drive"
	"rackpool/internal/redfish/service"
	"rackpool/internal/rf"
	"rackpool/internal/tenancy"
)

// drives is a hand-written Drives: connect answers Connect, the rest is
// empty.
type drives struct {
	connect func(drive.ConnectRequest) (drive.Grant, error)
}

func (d drives) Heartbeat(context.Context, drive.Heartbeat) (drive.Assignment, error) {
	return drive.Assignment{}, drive.ErrBadInput
}
func (d drives) Nodes() []drive.NodeInfo               { return nil }
func (d drives) Node(string) (drive.NodeInfo, error)   { return drive.NodeInfo{}, drive.ErrNotFound }
func (d drives) Drives() []drive.DriveInfo             { return []drive.DriveInfo{{}} }
func (d drives) Drive(string) (drive.DriveInfo, error) { return drive.DriveInfo{}, drive.ErrNotFound }
func (d drives) Release(context.Context, string, string) (drive.Writer, error) {
	return drive.Writer{}, drive.ErrNotFound
}
func (d drives) Connect(_ context.Context, req drive.ConnectRequest) (drive.Grant, error) {
	return d.connect(req)
}

func callDrives(t *testing.T, s *PooledDrives, pattern, body string, p tenancy.Principal, vals map[string]string) (*httptest.ResponseRecorder, *notes, error) {
	t.Helper()
	for _, rt := range DriveRoutes {
		if rt.Pattern != pattern {
			continue
		}
		method, _, _ := strings.Cut(pattern, " ")
		r := httptest.NewRequest(method, "/x", strings.NewReader(body))
		r.RemoteAddr = "192.0.2.7:40000"
		n := &notes{}
		r = r.WithContext(service.WithNotes(service.WithPrincipal(r.Context(), p), n))
		for k, v := range vals {
			r.SetPathValue(k, v)
		}
		w := httptest.NewRecorder()
		return w, n, rt.Handler(s, w, r)
	}
	t.Fatalf("no route %q", pattern)
	return nil, nil, nil
}

const connectDrive = "POST /redfish/v1/Oem/Rackpool/Drives/{id}/Actions/Oem/Rackpool.Connect"

func TestConnectDrive(t *testing.T) {
	var got drive.ConnectRequest
	s := NewPooledDrives(drives{connect: func(req drive.ConnectRequest) (drive.Grant, error) {
		got = req
		return drive.Grant{Drive: req.Drive, Node: "bn-1", Token: "tok", Epoch: 3, Rights: req.Rights, Holder: req.Holder, Generation: 2,
			Expiry: time.Unix(0, 0)}, nil
	}})
	root := tenancy.Principal{User: "root"}
	vals := map[string]string{"id": "hdd1"}
	w, n, err := callDrives(t, s, connectDrive, `{"Rights":"rw","TTLSeconds":30}`, root, vals)
	if err != nil {
		t.Fatal(err)
	}
	// A writer is, by default, the account at its client's address.
	if got.Drive != "hdd1" || got.Holder != "root@192.0.2.7" || got.TTL != 30*time.Second || got.Rights&blocknode.RightWrite == 0 {
		t.Fatalf("request %+v", got)
	}
	var body map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
		t.Fatal(err)
	}
	if body["Token"] != "tok" || body["Holder"] != "root@192.0.2.7" || strings.Contains(n.detail, "tok") {
		t.Fatalf("answer %s, audit %q", w.Body, n.detail)
	}
	// A reader holds no reservation.
	if _, _, err := callDrives(t, s, connectDrive, `{"Rights":"r","Holder":"me"}`, root, vals); err != nil || got.Holder != "" {
		t.Fatalf("reader: holder %q, err %v", got.Holder, err)
	}
	// Pooled drives are the operators': to a tenant they do not exist.
	if _, _, err := callDrives(t, s, connectDrive, `{}`, tenancy.Principal{User: "a", Tenant: "a"}, vals); problemID(err) != rf.Registry+"ResourceNotFound" {
		t.Fatalf("tenant: err %v", err)
	}
	if _, _, err := callDrives(t, s, connectDrive, `{"TTLSeconds":0}`, root, vals); problemID(err) != rf.Registry+"PropertyValueIncorrect" {
		t.Fatalf("TTL 0: err %v", err)
	}
	// A tenant's collection is empty; an operator's is not.
	for p, want := range map[string]int{"": 1, "a": 0} {
		w, _, err := callDrives(t, s, "GET /redfish/v1/Oem/Rackpool/Drives", "", tenancy.Principal{User: "u", Tenant: p}, nil)
		if err != nil {
			t.Fatal(err)
		}
		var c struct{ Members []any }
		if err := json.Unmarshal(w.Body.Bytes(), &c); err != nil || len(c.Members) != want {
			t.Errorf("tenant %q: %s", p, w.Body)
		}
	}
}

func TestNoDriveService(t *testing.T) {
	s := NewPooledDrives(nil)
	for _, rt := range DriveRoutes {
		_, _, err := callDrives(t, s, rt.Pattern, `{}`, tenancy.Principal{}, map[string]string{"id": "x"})
		if problemID(err) != rf.Registry+"ResourceMissingAtURI" {
			t.Errorf("%s: err %v", rt.Pattern, err)
		}
	}
}

func TestTranslateDrive(t *testing.T) {
	p, ok := TranslateDrive(&drive.ReservedError{Drive: "hdd1", Writer: drive.Writer{Holder: "bob@h", Generation: 4}})
	if !ok || p.Status != http.StatusConflict || p.ID != rf.Registry+"ResourceInUse" {
		t.Fatalf("reserved: %+v, %v", p, ok)
	}
	wr, _ := p.Oem["Rackpool"].(map[string]any)["WriteReservation"].(map[string]any)
	if wr["Holder"] != "bob@h" || wr["Generation"] != uint64(4) {
		t.Fatalf("reserved: Oem %v", p.Oem)
	}
	for err, status := range map[error]int{drive.ErrNotFound: 404, drive.ErrBadInput: 400, drive.ErrConflict: 409, drive.ErrUnavailable: 503} {
		if p, ok := TranslateDrive(err); !ok || p.Status != status {
			t.Errorf("TranslateDrive(%v) = %+v, %v", err, p, ok)
		}
	}
	if _, ok := TranslateDrive(errors.New("other")); ok {
		t.Error("an error not the drive manager's was translated")
	}
}
