package blocknode

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"rackpool/internal/nbd"
)

// Assignment is what the control plane's answer to a heartbeat gives the
// node: the drives it serves, each at its ownership epoch, until Sent +
// LeaseTTL by the node's own clock (Sent is when the node sent the
// heartbeat, so the lease never outlasts the control plane's view of it).
type Assignment struct {
	Key      Key
	Drives   []Assigned
	Sent     time.Time
	LeaseTTL time.Duration
}

// Assigned is one drive of an Assignment. Generation is the drive's write
// reservation generation (reserve.go).
type Assigned struct {
	ID         string
	Epoch      uint64
	Size       int64
	Generation uint64
}

// Options configure a Server.
type Options struct {
	// Dir holds the drive images, DIR/<drive>.img: files or symlinks to
	// block devices standing for the physical drives behind the switch.
	// Every blocknode of a switch is given the same directory.
	Dir    string
	Logger *slog.Logger
	// Refresh, when set, asks the control plane for a fresh assignment
	// now (a synchronous heartbeat): a client presenting a token for a
	// drive this node has not heard it owns yet makes the node ask before
	// refusing, so a failed-over drive is served as soon as it is mapped.
	Refresh func(ctx context.Context) error
	// TLS, when set, makes the node serve NBD over TLS only (nbd.Server's
	// TLSConfig). The capability token in the export name remains the
	// client's credential; TLS keeps it and the data secret on the wire.
	TLS *tls.Config
}

// Server is a blocknode: it serves the drives assigned to it over NBD.
type Server struct {
	o    Options
	log  *slog.Logger
	nbd  *nbd.Server
	base time.Time // monotonic origin of leaseUntil

	leaseUntil atomic.Int64 // nanoseconds since base; 0: no lease

	mu     sync.RWMutex
	key    Key
	drives map[string]*served

	refreshMu   sync.Mutex
	lastRefresh time.Time

	readBytes, writeBytes, ops atomic.Uint64
}

// served is one drive image this node has opened. It stays open for the
// life of the process (at most one descriptor per drive of the switch);
// epoch is 0 while the drive is not this node's.
type served struct {
	id    string
	file  *nbd.FileExport
	epoch atomic.Uint64
	conns atomic.Int64 // connections opened with a token, not closed yet
	res   reservation  // the write reservation's generation (reserve.go)
}

// New returns a Server for the images in o.Dir.
func New(o Options) (*Server, error) {
	if o.Dir == "" {
		return nil, errors.New("blocknode: a drive directory is required")
	}
	if fi, err := os.Stat(o.Dir); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("blocknode: drive directory %s: not a directory", o.Dir)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{o: o, log: o.Logger, base: time.Now(), drives: map[string]*served{}}
	s.nbd = &nbd.Server{Exports: exports{s}, Logger: o.Logger, LogName: RedactExportName, TLSConfig: o.TLS}
	return s, nil
}

// SetRefresh sets Options.Refresh (the Agent's Beat, built after the
// server).
func (s *Server) SetRefresh(f func(ctx context.Context) error) {
	s.refreshMu.Lock()
	s.o.Refresh = f
	s.refreshMu.Unlock()
}

// Serve serves NBD on l until Close.
func (s *Server) Serve(l net.Listener) error { return s.nbd.Serve(l) }

// Close stops serving and closes the drive images.
func (s *Server) Close() error {
	err := s.nbd.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range s.drives {
		err = errors.Join(err, d.file.Close())
	}
	s.drives = map[string]*served{}
	return err
}

// Load is what the node has served since it started.
func (s *Server) Load() (readBytes, writeBytes, ops uint64) {
	return s.readBytes.Load(), s.writeBytes.Load(), s.ops.Load()
}

// Apply installs an assignment: drives it lists are served at their
// epochs, every other drive is refused from now on, and the node lease
// runs until a.Sent + a.LeaseTTL. A drive whose image is missing is
// created as an empty (sparse) file of its size; one that cannot be
// opened is logged and not served.
func (s *Server) Apply(a Assignment) {
	s.mu.Lock()
	if len(a.Key) == KeySize {
		s.key = a.Key
	}
	keep := map[string]bool{}
	for _, d := range a.Drives {
		keep[d.ID] = true
		sd := s.drives[d.ID]
		if sd == nil {
			f, err := s.open(d)
			if err != nil {
				s.log.Error("cannot serve drive", "drive", d.ID, "err", err)
				continue
			}
			sd = &served{id: d.ID, file: f}
			s.drives[d.ID] = sd
			s.log.Info("serving drive", "drive", d.ID, "epoch", d.Epoch, "bytes", f.Size())
		} else if old := sd.epoch.Load(); old != d.Epoch {
			s.log.Info("serving drive", "drive", d.ID, "epoch", d.Epoch, "was", old)
		}
		if sd.res.raise(d.Generation) {
			s.log.Info("drive's write reservation moved", "drive", d.ID, "generation", d.Generation)
		}
		sd.epoch.Store(d.Epoch)
	}
	for id, sd := range s.drives {
		if !keep[id] && sd.epoch.Load() != 0 {
			sd.epoch.Store(0)
			s.log.Info("drive taken away", "drive", id)
		}
	}
	s.mu.Unlock()
	until := a.Sent.Sub(s.base) + a.LeaseTTL
	if until > time.Duration(s.leaseUntil.Load()) {
		s.leaseUntil.Store(int64(until))
	}
}

// open opens (creating if missing) drive d's image. s.mu held.
func (s *Server) open(d Assigned) (*nbd.FileExport, error) {
	if d.ID == "" || d.ID != filepath.Base(d.ID) || d.ID == "." || d.ID == ".." {
		return nil, fmt.Errorf("drive ID %q is not a file name", d.ID)
	}
	path := filepath.Join(s.o.Dir, d.ID+".img")
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if err == nil {
			err = errors.Join(f.Truncate(d.Size), f.Close())
		}
		if err != nil && !errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("create empty drive image %s: %w", path, err)
		}
	}
	return nbd.NewFileExport(path, false)
}

// leased reports whether the node lease holds now.
func (s *Server) leased() bool {
	until := s.leaseUntil.Load()
	return until != 0 && int64(time.Since(s.base)) < until
}

// Served lists the drives this node serves now, with their epochs.
func (s *Server) Served() map[string]uint64 {
	out := map[string]uint64{}
	if !s.leased() {
		return out
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	for id, d := range s.drives {
		if e := d.epoch.Load(); e != 0 {
			out[id] = e
		}
	}
	return out
}

// InUse lists, sorted, the drives a client has a connection open to
// (opened with a token; a bare name's view for listing does not count).
// The heartbeat reports it: the control plane does not move such a drive
// to balance the load.
func (s *Server) InUse() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []string
	for id, d := range s.drives {
		if d.conns.Load() > 0 {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// refresh asks the control plane for a fresh assignment, at most once per
// 20 ms across all callers.
func (s *Server) refresh(ctx context.Context) {
	if s.o.Refresh == nil {
		return
	}
	s.refreshMu.Lock()
	defer s.refreshMu.Unlock()
	if time.Since(s.lastRefresh) < 20*time.Millisecond {
		return
	}
	if err := s.o.Refresh(ctx); err != nil {
		s.log.Debug("refresh assignment", "err", err)
	}
	s.lastRefresh = time.Now()
}

// exports is the server's nbd.Exports.
type exports struct{ s *Server }

// Open checks the token in "<drive>@<token>" and returns the drive fenced
// at the token's epoch.
func (x exports) Open(ctx context.Context, name string) (nbd.Export, error) {
	s := x.s
	id, tok, ok := SplitExportName(name)
	if !ok {
		// A bare drive name (nbdinfo --list opens every listed export)
		// shows the drive's size and read-only flags; every request
		// fails with EPERM.
		s.mu.RLock()
		d := s.drives[id]
		s.mu.RUnlock()
		if d == nil || d.epoch.Load() == 0 || !s.leased() {
			return nil, fmt.Errorf("%w: no drive %q here; export names are <drive>@<token>", nbd.ErrUnknownExport, id)
		}
		return &fenced{s: s, d: d, epoch: d.epoch.Load()}, nil
	}
	s.mu.RLock()
	key := s.key
	s.mu.RUnlock()
	if key == nil {
		return nil, fmt.Errorf("%w: this blocknode has not registered yet", nbd.ErrPolicy)
	}
	c, err := key.Verify(tok, time.Now())
	if err != nil {
		return nil, fmt.Errorf("%w: %v", nbd.ErrPolicy, err)
	}
	if c.Drive != id {
		return nil, fmt.Errorf("%w: the token is for another drive", nbd.ErrPolicy)
	}
	d := s.current(id, c.Epoch)
	if d == nil {
		s.refresh(ctx)
		d = s.current(id, c.Epoch)
	}
	if d == nil {
		return nil, fmt.Errorf("%w: drive %s is not served here at epoch %d", nbd.ErrUnknownExport, id, c.Epoch)
	}
	if c.Rights&RightWrite != 0 {
		if err := d.res.admit(id, c.Generation); err != nil {
			return nil, err
		}
	}
	d.conns.Add(1)
	return &fenced{s: s, d: d, epoch: c.Epoch, rights: c.Rights, gen: c.Generation, counted: true}, nil
}

// current returns drive id if this node serves it at epoch now.
func (s *Server) current(id string, epoch uint64) *served {
	s.mu.RLock()
	d := s.drives[id]
	s.mu.RUnlock()
	if d == nil || d.epoch.Load() != epoch || !s.leased() {
		return nil
	}
	return d
}

// List names the drives served now (names only: opening one needs a
// token).
func (x exports) List(context.Context) ([]nbd.ExportInfo, error) {
	ids := make([]string, 0)
	for id := range x.s.Served() {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	out := make([]nbd.ExportInfo, 0, len(ids))
	for _, id := range ids {
		out = append(out, nbd.ExportInfo{Name: id, Description: "pooled drive " + id + " (open as " + id + Separator + "<token>)"})
	}
	return out, nil
}

// fenced is one connection's view of a drive: every request first checks
// that the node still owns the drive at the token's epoch and its lease
// holds, else it fails with EPERM and touches nothing; a write, trim or
// write-zeroes also that the token's write reservation generation is
// current (reserve.go). Opened without a token it has no rights:
// read-only flags, and EPERM for every request.
type fenced struct {
	s       *Server
	d       *served
	epoch   uint64
	rights  Rights
	gen     uint64 // the token's write reservation generation
	counted bool   // in d.conns (opened with a token)
}

var errFenced = fmt.Errorf("%w: this blocknode no longer owns the drive (moved or lease lapsed); resolve it again", nbd.ErrPermission)

func (f *fenced) check(need Rights) error {
	if f.d.epoch.Load() != f.epoch || !f.s.leased() {
		return errFenced
	}
	if f.rights&need != need {
		return fmt.Errorf("%w: the token does not allow this", nbd.ErrPermission)
	}
	f.s.ops.Add(1)
	return nil
}

func (f *fenced) Size() uint64 { return f.d.file.Size() }

func (f *fenced) Flags() nbd.ExportFlags {
	fl := f.d.file.Flags()
	if f.rights&RightWrite == 0 {
		fl.ReadOnly = true
	}
	return fl
}

func (f *fenced) ReadAt(ctx context.Context, p []byte, off uint64) error {
	if err := f.check(RightRead); err != nil {
		return err
	}
	f.s.readBytes.Add(uint64(len(p)))
	return f.d.file.ReadAt(ctx, p, off)
}

func (f *fenced) WriteAt(ctx context.Context, p []byte, off uint64, fua bool) error {
	if err := f.lockWrite(); err != nil {
		return err
	}
	defer f.unlockWrite()
	f.s.writeBytes.Add(uint64(len(p)))
	return f.d.file.WriteAt(ctx, p, off, fua)
}

func (f *fenced) Flush(ctx context.Context) error {
	if err := f.check(0); err != nil {
		return err
	}
	return f.d.file.Flush(ctx)
}

func (f *fenced) Trim(ctx context.Context, off, length uint64, fua bool) error {
	if err := f.lockWrite(); err != nil {
		return err
	}
	defer f.unlockWrite()
	return f.d.file.Trim(ctx, off, length, fua)
}

func (f *fenced) Zero(ctx context.Context, off, length uint64, z nbd.ZeroFlags) error {
	if err := f.lockWrite(); err != nil {
		return err
	}
	defer f.unlockWrite()
	return f.d.file.Zero(ctx, off, length, z)
}

func (f *fenced) BlockStatus(ctx context.Context, off, length uint64) ([]nbd.Extent, error) {
	if err := f.check(RightRead); err != nil {
		return nil, err
	}
	return f.d.file.BlockStatus(ctx, off, length)
}

// Close leaves the image open: other connections and later owners share
// it.
func (f *fenced) Close() error {
	if f.counted {
		f.d.conns.Add(-1)
	}
	return nil
}

// Inline is the image's: the checks add two atomic loads (and, for a
// write, the reservation's read lock) to its system calls, so requests
// still run on the connection's reading goroutine.
func (f *fenced) Inline() bool { return f.d.file.Inline() }

var _ nbd.InlineExport = (*fenced)(nil)
