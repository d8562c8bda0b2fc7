package drive

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"rackpool/internal/inventory"
	"rackpool/internal/store"
)

// One writer per drive.
//
// Each pooled drive has a write reservation, like a SCSI persistent
// reservation of type Write Exclusive: one holder may write the drive,
// anyone may read it. A holder is a name the client chooses (drive connect
// sends "<hostname>/drive-connect/<pid>" unless told another); clients
// that give the same name share the reservation, which is how one holder's
// several connections and reconnections work. Connect with write rights
// records the caller as the holder when there is none, gives a grant to
// the holder, and refuses anyone else with a ReservedError (409) naming
// the holder, unless the request preempts: then the caller becomes the
// holder and the previous one is fenced.
//
// Fencing uses a generation, SCSI's PRgeneration: a per-drive counter
// raised by every change of holder (a new one, a preempt, a release). A
// token with write rights carries the generation it was issued under; a
// blocknode keeps the highest generation it has seen per drive (from the
// tokens it verifies and from the heartbeat answer, Assigned.Generation)
// and refuses the writes of older ones with EPERM, the way it refuses a
// stale ownership epoch. The generation is not the epoch: a preempt must
// not fence the readers, and a failover must not fence the writer. A
// failover carries the generation along: the new owner reads it in its
// heartbeat answer.
//
// The reservation is a versioned store record of its own (kindWriter),
// written before the token that depends on it is returned. It has no
// time-out: like a SCSI reservation it lasts until its holder releases it
// (drive connect does when it exits cleanly) or another preempts it; a
// crashed holder's reservation is taken over by an explicit preempt. The
// version check makes two replicas that both think they lead agree on
// one holder.

// kindWriter is the store kind of the write reservations, one per drive
// that has ever had one.
const kindWriter = "drive-writer"

// maxHolderLen bounds a holder name, in bytes.
const maxHolderLen = 256

// Writer is a drive's write reservation: who may write it (Holder, "" when
// released or never taken), under which generation, since when.
type Writer struct {
	Holder     string    `json:"holder,omitempty"`
	Generation uint64    `json:"generation"`
	Since      time.Time `json:"since"`
}

// writerRecord is a kindWriter record.
type writerRecord struct {
	Drive string `json:"drive"`
	Writer
}

// ReservedError is the refusal of a writer while another holder has the
// drive's write reservation. It matches ErrReserved and ErrConflict.
type ReservedError struct {
	Drive  string
	Writer Writer // the current reservation
	// Releasing: the refusal of a release by someone not the holder.
	Releasing bool
}

func (e *ReservedError) Error() string {
	held := fmt.Sprintf("drive %s is reserved for writing by %q since %s (generation %d)", e.Drive, e.Writer.Holder,
		e.Writer.Since.UTC().Format(time.RFC3339), e.Writer.Generation)
	if e.Releasing {
		return held + ": only its holder releases it"
	}
	return held + ": connect read-only, have its holder release it, or take it over with Preempt " +
		"(rackpool drive connect --preempt), which fences the holder's writes"
}

// Is makes errors.Is(err, ErrReserved) and errors.Is(err, ErrConflict)
// true.
func (e *ReservedError) Is(target error) bool { return target == ErrReserved || target == ErrConflict }

// writers is the manager's copy of the stored write reservations.
type writers struct {
	change sync.Mutex // serialises changes: one store write at a time

	mu      sync.Mutex
	byDrive map[string]storedWriter
}

type storedWriter struct {
	w       Writer
	version int64 // of its kindWriter record; 0: none stored
}

// get returns drive id's reservation (the zero Writer if it never had
// one).
func (ws *writers) get(id string) storedWriter {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	return ws.byDrive[id]
}

func (ws *writers) set(id string, s storedWriter) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.byDrive == nil {
		ws.byDrive = map[string]storedWriter{}
	}
	if s.version >= ws.byDrive[id].version {
		ws.byDrive[id] = s
	}
}

// load reads every stored reservation.
func loadWriters(ctx context.Context, st store.Store) (map[string]storedWriter, error) {
	out := map[string]storedWriter{}
	err := store.Decode(ctx, st, kindWriter, func(ob store.Object, r *writerRecord) error {
		out[ob.ID] = storedWriter{w: r.Writer, version: ob.Version}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("drive: load write reservations: %w", err)
	}
	return out, nil
}

// replace installs what loadWriters read.
func (ws *writers) replace(all map[string]storedWriter) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	ws.byDrive = all
}

// checkHolder refuses an empty, overlong or unprintable holder name.
func checkHolder(h string) error {
	switch {
	case h == "":
		return fmt.Errorf("%w: a writer needs a Holder name (the write reservation's holder)", ErrBadInput)
	case len(h) > maxHolderLen:
		return fmt.Errorf("%w: Holder is %d bytes, at most %d", ErrBadInput, len(h), maxHolderLen)
	case !utf8.ValidString(h):
		return fmt.Errorf("%w: Holder is not UTF-8", ErrBadInput)
	}
	for _, r := range h {
		if unicode.IsControl(r) {
			return fmt.Errorf("%w: Holder contains a control character", ErrBadInput)
		}
	}
	return nil
}

// reserve makes holder drive id's writer, or finds it is already: a
// holder keeps its generation; another holder is refused unless preempt,
// which takes the reservation over at the next generation.
func (m *Manager) reserve(ctx context.Context, id, holder string, preempt bool) (Writer, error) {
	if err := checkHolder(holder); err != nil {
		return Writer{}, err
	}
	if cur := m.res.get(id); cur.w.Holder == holder {
		return cur.w, nil // the holder again: nothing to write
	}
	return m.changeWriter(ctx, id, func(cur Writer) (Writer, bool, error) {
		switch {
		case cur.Holder == holder:
			return cur, false, nil
		case cur.Holder != "" && !preempt:
			return Writer{}, false, &ReservedError{Drive: id, Writer: cur}
		}
		return Writer{Holder: holder, Generation: cur.Generation + 1, Since: m.o.Clock.Now().UTC()}, true, nil
	}, func(prev, next Writer) {
		if prev.Holder != "" {
			m.event(Event{Severity: "Warning", Drive: id, Message: fmt.Sprintf(
				"drive %s's write reservation was preempted: %q (since %s) no longer writes it; %q does, at generation %d",
				id, prev.Holder, prev.Since.Format(time.RFC3339), next.Holder, next.Generation)})
		}
	})
}

// Release ends holder's write reservation of drive id and returns the
// reservation as it is now. The generation is raised, so tokens issued to
// the holder write no more. Releasing a drive nobody holds does nothing
// (as a SCSI RELEASE); releasing another holder's reservation is refused
// with a ReservedError.
func (m *Manager) Release(ctx context.Context, id, holder string) (Writer, error) {
	dev := m.o.Topology.Device(id)
	if !pooled(dev) {
		return Writer{}, fmt.Errorf("%w: no pooled drive %q", ErrNotFound, id)
	}
	if err := checkHolder(holder); err != nil {
		return Writer{}, err
	}
	return m.changeWriter(ctx, id, func(cur Writer) (Writer, bool, error) {
		switch {
		case cur.Holder == "":
			return cur, false, nil
		case cur.Holder != holder:
			return Writer{}, false, &ReservedError{Drive: id, Writer: cur, Releasing: true}
		}
		return Writer{Generation: cur.Generation + 1, Since: m.o.Clock.Now().UTC()}, true, nil
	}, nil)
}

// changeWriter applies decide to drive id's reservation: when decide asks
// for a change, the new reservation is stored at the next version; if
// another replica changed it meanwhile, it is read again and decided
// again. done (may be nil) runs after a stored change.
func (m *Manager) changeWriter(ctx context.Context, id string, decide func(cur Writer) (Writer, bool, error), done func(prev, next Writer)) (Writer, error) {
	m.res.change.Lock()
	defer m.res.change.Unlock()
	cur := m.res.get(id)
	for attempt := 0; ; attempt++ {
		next, change, err := decide(cur.w)
		if err != nil || !change {
			return next, err
		}
		data, _ := json.Marshal(writerRecord{Drive: id, Writer: next})
		err = m.o.Store.Apply(ctx, store.Plan{Objects: []store.ObjectChange{{Kind: kindWriter,
			Object: store.Object{ID: id, Data: data, Version: cur.version + 1}}}})
		if err == nil {
			m.res.set(id, storedWriter{w: next, version: cur.version + 1})
			if done != nil {
				done(cur.w, next)
			}
			return next, nil
		}
		if !errors.Is(err, store.ErrConflict) || attempt == 2 {
			return Writer{}, fmt.Errorf("%w: drive %s: record the write reservation: %v", ErrUnavailable, id, err)
		}
		// Another replica wrote it: read it again and decide again.
		all, lerr := loadWriters(ctx, m.o.Store)
		if lerr != nil {
			return Writer{}, fmt.Errorf("%w: %v", ErrUnavailable, lerr)
		}
		cur = all[id]
		m.res.set(id, cur)
	}
}

// pooled reports whether dev is a drive of a SAS circuit switch.
func pooled(dev *inventory.Device) bool {
	return dev != nil && dev.Fabric != nil && dev.Fabric.Kind == inventory.SASCircuit
}
