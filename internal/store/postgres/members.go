package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"rackpool/internal/store"
)

// Membership of several active replicas (docs/ha.md). Each replica leads a
// role of its own, MemberPrefix plus a name unique to the process, whose
// epoch fences its writes (Lead). The leader of the replicas lists the
// members (Members) and evicts one whose session has ended (Evict): it takes
// the member's lock, raises its epoch so that nothing the member still
// sends can commit, settles the member's unfinished work, and removes the
// member's row.

// MemberPrefix begins the role name of an active replica's membership.
const MemberPrefix = "member/"

// Member is one active replica as the database knows it.
type Member struct {
	Name  string // its role, MemberPrefix…
	Epoch int64
	// Alive: its session holds its lock (it has not died or fallen
	// silent for a lease).
	Alive bool
}

// Members lists the replicas that hold or held a membership and have not
// been evicted.
func (s *Store) Members(ctx context.Context) ([]Member, error) {
	if s.isClosed() {
		return nil, store.ErrClosed
	}
	rows, err := s.pool.Query(ctx, `SELECT name, epoch FROM fence WHERE name LIKE $1 ORDER BY name`, MemberPrefix+"%")
	if err != nil {
		return nil, s.readErr("store: members", err)
	}
	members, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Member, error) {
		var m Member
		return m, r.Scan(&m.Name, &m.Epoch)
	})
	if err != nil {
		return nil, s.readErr("store: members", err)
	}
	rows, err = s.pool.Query(ctx, `SELECT (classid::bigint << 32) | objid::bigint FROM pg_locks
		WHERE locktype = 'advisory' AND granted AND objsubid = 1 AND mode = 'ExclusiveLock'`)
	if err != nil {
		return nil, s.readErr("store: members' locks", err)
	}
	locked := map[int64]bool{}
	keys, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, s.readErr("store: members' locks", err)
	}
	for _, k := range keys {
		locked[k] = true
	}
	for i := range members {
		members[i].Alive = locked[lockKey("leader", members[i].Name)]
	}
	return members, nil
}

// ErrAlive: Evict found the member's session holding its lock.
var ErrAlive = errors.New("the member is alive")

// Evict removes a member whose session has ended. On a connection of its
// own it takes the member's lock (ErrAlive if the member holds it), raises
// the member's epoch, which waits for the member's transactions under way
// and fences every later one, and calls settle with the raised epoch: the
// caller finishes or rolls back the member's unfinished work, carrying that
// epoch to the fabrics. Once settle succeeds the member's row is removed
// (its writes then fail with ErrFenced for good); if it fails the row
// stays, with its raised epoch, for a later Evict.
func (s *Store) Evict(ctx context.Context, name string, settle func(ctx context.Context, epoch int64) error) error {
	if !strings.HasPrefix(name, MemberPrefix) {
		return fmt.Errorf("evict %q: not a member", name)
	}
	if s.isClosed() {
		return store.ErrClosed
	}
	cfg := s.cfg.ConnConfig.Copy()
	cfg.RuntimeParams["application_name"] = "rackpool evicting " + name
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return s.readErr("evict "+name+": connect", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		conn.Close(cctx)
	}()
	key := lockKey("leader", name)
	var ok bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, key).Scan(&ok); err != nil {
		return s.readErr("evict "+name+"", err)
	}
	if !ok {
		return fmt.Errorf("evict %s: %w", name, ErrAlive)
	}
	// Release the lock before the connection closes: the server ends a
	// closed connection's session (and its locks) a moment later, and an
	// Evict right after this one must not find the lock still held.
	defer func() {
		uctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, _ = conn.Exec(uctx, `SELECT pg_advisory_unlock($1)`, key)
	}()
	var epoch int64
	if err := conn.QueryRow(ctx, `UPDATE fence SET epoch = epoch + 1 WHERE name = $1 RETURNING epoch`, name).Scan(&epoch); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return nil // evicted already
		}
		return s.readErr("evict "+name+": raise its epoch", err)
	}
	if err := settle(ctx, epoch); err != nil {
		return fmt.Errorf("evict %s: %w", name, err)
	}
	if _, err := conn.Exec(ctx, `DELETE FROM fence WHERE name = $1 AND epoch = $2`, name, epoch); err != nil {
		return s.readErr("evict "+name+"", err)
	}
	return nil
}
