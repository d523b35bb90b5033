package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Several gateway processes (replicas) may share one database. Each one
// records itself in replicas and refreshes its heartbeat there; a replica
// whose heartbeat is older than the caller's ttl, or that has no row at all,
// is dead. Work is split by leases:
//
//   - a chat lease (chat_leases) makes one replica the only one that answers
//     the chat's inbox items, so a chat's messages are handled in order;
//   - a role lease (roles) makes one replica the only one that runs a
//     cluster-wide job (the scheduler, the learning jobs, …).
//
// A lease is live while its owner is: a replica that stops heartbeating
// loses its leases to whichever replica asks next, without anyone deleting
// them. A replica that shuts down cleanly hands everything over at once
// (RetireReplica).
//
// Taking a lease is one INSERT … ON CONFLICT DO UPDATE … WHERE statement
// (sqlAcquireChat), run in inTx. On SQLite it runs under the file's write
// lock, one at a time. On Postgres it is SERIALIZABLE, and that matters:
// under READ COMMITTED the holder's liveness (the subquery on replicas) is
// read from the statement's snapshot, while the conflicting lease row is
// re-read as last committed. A statement that started before a new replica's
// first heartbeat committed (or before a paused one's next), and then waited
// for that replica's insert of the lease, would see the replica dead and
// take the lease it had just been given: two holders. SERIALIZABLE fails
// such a statement instead (the lease row changed after its snapshot), and
// inTx runs it again with a fresh one (TestAcquireSeesHolderThatJustStarted).
// Two racing acquires of one lease thus have exactly one winner.

// migrationCluster: replicas and their leases. The inbox index finds a
// chat's pending items without scanning its history (ReleaseChat,
// PendingInboxOf).
const migrationCluster = `
CREATE TABLE replicas (
	id           TEXT    PRIMARY KEY,
	info         TEXT    NOT NULL DEFAULT '',
	started_at   INTEGER NOT NULL,
	heartbeat_at INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TABLE chat_leases (
	channel     TEXT    NOT NULL,
	chat_key    TEXT    NOT NULL,
	owner       TEXT    NOT NULL,
	acquired_at INTEGER NOT NULL,
	PRIMARY KEY (channel, chat_key)
) WITHOUT ROWID;
CREATE INDEX chat_leases_owner ON chat_leases (owner);

CREATE TABLE roles (
	name        TEXT    PRIMARY KEY,
	owner       TEXT    NOT NULL,
	acquired_at INTEGER NOT NULL
) WITHOUT ROWID;

CREATE INDEX inbox_pending_chat ON inbox (channel, chat_key, id) WHERE status = 'pending';
`

// Replica is a gateway process sharing the store.
type Replica struct {
	ID, Info               string
	StartedAt, HeartbeatAt time.Time
}

// Lease is a chat or role held by a replica: Channel and ChatKey are set
// for a chat, Role for a role.
type Lease struct {
	Channel, ChatKey string // chats
	Role             string // roles
	Owner            string
	AcquiredAt       time.Time
}

// defaultClaimLimit is ClaimablePending's limit when none is given.
const defaultClaimLimit = 1000

const (
	sqlHeartbeat = `INSERT INTO replicas (id, info, started_at, heartbeat_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET info = excluded.info, heartbeat_at = excluded.heartbeat_at`
	sqlReplicas          = `SELECT id, info, started_at, heartbeat_at FROM replicas ORDER BY id`
	sqlRetireChatLeases  = `DELETE FROM chat_leases WHERE owner = ?`
	sqlRetireRoles       = `DELETE FROM roles WHERE owner = ?`
	sqlRetireReplicasRow = `DELETE FROM replicas WHERE id = ?`

	// sqlAcquireChat takes the chat's lease for owner: it inserts it, or
	// takes it over when owner already holds it (acquired_at kept) or its
	// holder is dead (no replicas row with a heartbeat after the bound).
	// A row comes back iff owner holds the lease afterwards.
	// Arguments: channel, chat key, owner, now, live bound (now - ttl).
	sqlAcquireChat = `INSERT INTO chat_leases (channel, chat_key, owner, acquired_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (channel, chat_key) DO UPDATE SET owner = excluded.owner,
			acquired_at = CASE WHEN chat_leases.owner = excluded.owner THEN chat_leases.acquired_at ELSE excluded.acquired_at END
		WHERE chat_leases.owner = excluded.owner
			OR NOT EXISTS (SELECT 1 FROM replicas r WHERE r.id = chat_leases.owner AND r.heartbeat_at > ?)
		RETURNING owner`
	// sqlAcquireRole is sqlAcquireChat for roles. Arguments: role, owner,
	// now, live bound.
	sqlAcquireRole = `INSERT INTO roles (name, owner, acquired_at) VALUES (?, ?, ?)
		ON CONFLICT (name) DO UPDATE SET owner = excluded.owner,
			acquired_at = CASE WHEN roles.owner = excluded.owner THEN roles.acquired_at ELSE excluded.acquired_at END
		WHERE roles.owner = excluded.owner
			OR NOT EXISTS (SELECT 1 FROM replicas r WHERE r.id = roles.owner AND r.heartbeat_at > ?)
		RETURNING owner`

	// sqlReleaseChat deletes owner's lease on a chat without pending items.
	sqlReleaseChat = `DELETE FROM chat_leases WHERE channel = ? AND chat_key = ? AND owner = ?
		AND NOT EXISTS (SELECT 1 FROM inbox i WHERE i.channel = chat_leases.channel
			AND i.chat_key = chat_leases.chat_key AND i.status = 'pending')`
	sqlHoldsChat   = `SELECT COUNT(*) FROM chat_leases WHERE channel = ? AND chat_key = ? AND owner = ?`
	sqlReleaseRole = `DELETE FROM roles WHERE name = ? AND owner = ?`
	sqlLeasesRoles = `SELECT name, owner, acquired_at FROM roles WHERE owner = ? ORDER BY name`
	sqlLeasesChats = `SELECT channel, chat_key, owner, acquired_at FROM chat_leases WHERE owner = ? ORDER BY channel, chat_key`
	sqlInboxStatus = `SELECT status FROM inbox WHERE id = ?`

	// sqlClaimablePending: pending items, oldest first, of the chats no
	// live replica other than owner holds. Arguments: owner, live bound,
	// limit.
	sqlClaimablePending = `SELECT i.id, i.channel, i.chat_key, i.message_id, i.user_id, i.payload, i.status, i.received_at ` + sqlClaimableFrom
	// sqlClaimableRefs is sqlClaimablePending without the messages' content.
	sqlClaimableRefs = `SELECT i.id, i.channel, i.chat_key ` + sqlClaimableFrom
	sqlClaimableFrom = `FROM inbox i
		WHERE i.status = 'pending' AND NOT EXISTS (
			SELECT 1 FROM chat_leases l JOIN replicas r ON r.id = l.owner
			WHERE l.channel = i.channel AND l.chat_key = i.chat_key AND l.owner <> ? AND r.heartbeat_at > ?)
		ORDER BY i.id LIMIT ?`
)

// liveBound is the heartbeat time after which a replica is live for ttl,
// or an error for a ttl that cannot make one (below a millisecond).
func (s *Store) liveBound(ttl time.Duration) (int64, error) {
	if ttl < time.Millisecond {
		return 0, fmt.Errorf("ttl %v must be at least 1ms", ttl)
	}
	return s.nowMS() - ttl.Milliseconds(), nil
}

// Heartbeat records that replica is alive now: the first call inserts its
// row (started at now), later ones move its heartbeat to now and replace
// its info (free-form: host, pid, version).
func (s *Store) Heartbeat(ctx context.Context, replica, info string) error {
	if replica == "" {
		return errors.New("store: heartbeat: empty replica id")
	}
	// On a connection of its own, kept between beats: under load, waiting
	// for the pool or for a new connection to PostgreSQL took longer than
	// a beat may, and a replica that cannot beat must stop.
	s.hbMu.Lock()
	defer s.hbMu.Unlock()
	if s.hbConn == nil {
		c, err := s.raw.Conn(ctx)
		if err != nil {
			return fmt.Errorf("store: heartbeat of %s: %w", replica, err)
		}
		s.hbConn = c
	}
	now := s.nowMS()
	if _, err := (conn{q: s.hbConn, d: s.d}).ExecContext(ctx, sqlHeartbeat, replica, info, now, now); err != nil {
		// Perhaps broken (a timeout mid-query, a restarted server): the
		// next beat takes a fresh one.
		_ = s.hbConn.Close()
		s.hbConn = nil
		return fmt.Errorf("store: heartbeat of %s: %w", replica, err)
	}
	return nil
}

// Replicas returns the replicas that have a row, live or not, ordered by id.
func (s *Store) Replicas(ctx context.Context) ([]Replica, error) {
	out, err := queryAll(ctx, s.db, func(r rowScanner) (Replica, error) {
		var rp Replica
		var started, beat int64
		err := r.Scan(&rp.ID, &rp.Info, &started, &beat)
		rp.StartedAt, rp.HeartbeatAt = fromMS(started), fromMS(beat)
		return rp, err
	}, sqlReplicas)
	if err != nil {
		return nil, fmt.Errorf("store: replicas: %w", err)
	}
	return out, nil
}

// RetireReplica deletes the replica's chat leases, roles and row in one
// transaction: on a clean shutdown, every chat and role it held is free for
// the other replicas at once rather than after its heartbeat expires.
// Retiring an unknown replica does nothing.
func (s *Store) RetireReplica(ctx context.Context, replica string) error {
	if replica == "" {
		return errors.New("store: retire replica: empty replica id")
	}
	err := s.inTx(ctx, func(tx conn) error {
		for _, q := range []string{sqlRetireChatLeases, sqlRetireRoles, sqlRetireReplicasRow} {
			if _, err := tx.ExecContext(ctx, q, replica); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: retire replica %s: %w", replica, err)
	}
	return nil
}

// AcquireChat takes the chat's lease for owner and reports whether owner
// holds it afterwards: true when the lease was free, already owner's (its
// acquired_at is kept) or held by a dead replica (it passes to owner,
// acquired now); false when another replica holds it whose heartbeat is
// younger than ttl. A lease says nothing about owner's own liveness: owner
// should heartbeat (Heartbeat) before taking leases and keep doing so, or
// the others may take them over.
func (s *Store) AcquireChat(ctx context.Context, channel, chat, owner string, ttl time.Duration) (bool, error) {
	var ok bool
	var err error
	if channel == "" || chat == "" || owner == "" {
		err = errors.New("channel, chat and owner are required")
	} else {
		ok, err = s.acquire(ctx, ttl, sqlAcquireChat, func(now, bound int64) []any {
			return []any{channel, chat, owner, now, bound}
		})
	}
	if err != nil {
		return false, fmt.Errorf("store: acquire chat %s/%s for %q: %w", channel, chat, owner, err)
	}
	return ok, nil
}

// AcquireRole is AcquireChat for a role (a job only one replica runs).
func (s *Store) AcquireRole(ctx context.Context, role, owner string, ttl time.Duration) (bool, error) {
	var ok bool
	var err error
	if role == "" || owner == "" {
		err = errors.New("role and owner are required")
	} else {
		ok, err = s.acquire(ctx, ttl, sqlAcquireRole, func(now, bound int64) []any {
			return []any{role, owner, now, bound}
		})
	}
	if err != nil {
		return false, fmt.Errorf("store: acquire role %s for %q: %w", role, owner, err)
	}
	return ok, nil
}

// acquire runs an acquire statement with the arguments args makes of the
// clock's now and ttl's live bound; true when it returned a row. It runs in
// inTx: on Postgres SERIALIZABLE, see the comment at the top of the file.
func (s *Store) acquire(ctx context.Context, ttl time.Duration, query string, args func(now, bound int64) []any) (bool, error) {
	if _, err := s.liveBound(ttl); err != nil {
		return false, err
	}
	var ok bool
	err := s.inTx(ctx, func(tx conn) error {
		now := s.nowMS()
		var got string
		err := tx.QueryRowContext(ctx, query, args(now, now-ttl.Milliseconds())...).Scan(&got)
		ok = err == nil
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		return err
	})
	return ok, err
}

// ReleaseChat gives up owner's lease on the chat unless the chat still has
// pending inbox items. released is true when owner holds no lease on the
// chat afterwards (also when it held none); false when pending items remain
// and owner still holds it, to answer them first. An item taken in just
// after the release is not lost: the chat is free, and ClaimablePending
// offers it to every replica.
func (s *Store) ReleaseChat(ctx context.Context, channel, chat, owner string) (released bool, err error) {
	if channel == "" || chat == "" || owner == "" {
		return false, fmt.Errorf("store: release chat %q/%q for %q: channel, chat and owner are required", channel, chat, owner)
	}
	res, err := s.write(ctx, sqlReleaseChat, channel, chat, owner)
	if err != nil {
		return false, fmt.Errorf("store: release chat %s/%s for %q: %w", channel, chat, owner, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return false, fmt.Errorf("store: release chat %s/%s for %q: %w", channel, chat, owner, err)
	} else if n > 0 {
		return true, nil
	}
	// Nothing deleted: owner held no lease, or pending items kept it.
	var held int
	if err := s.db.QueryRowContext(ctx, sqlHoldsChat, channel, chat, owner).Scan(&held); err != nil {
		return false, fmt.Errorf("store: release chat %s/%s for %q: %w", channel, chat, owner, err)
	}
	return held == 0, nil
}

// ReleaseRole gives up owner's role; a role owner does not hold is left
// as it is.
func (s *Store) ReleaseRole(ctx context.Context, role, owner string) error {
	if role == "" || owner == "" {
		return fmt.Errorf("store: release role %q for %q: role and owner are required", role, owner)
	}
	if _, err := s.write(ctx, sqlReleaseRole, role, owner); err != nil {
		return fmt.Errorf("store: release role %s for %q: %w", role, owner, err)
	}
	return nil
}

// Leases returns the roles (by name) and then the chats (by channel and
// chat key) that owner holds, live or not.
func (s *Store) Leases(ctx context.Context, owner string) ([]Lease, error) {
	if owner == "" {
		return nil, errors.New("store: leases: empty owner")
	}
	roles, err := queryAll(ctx, s.db, func(r rowScanner) (Lease, error) {
		var l Lease
		var at int64
		err := r.Scan(&l.Role, &l.Owner, &at)
		l.AcquiredAt = fromMS(at)
		return l, err
	}, sqlLeasesRoles, owner)
	if err != nil {
		return nil, fmt.Errorf("store: leases of %s: %w", owner, err)
	}
	chats, err := queryAll(ctx, s.db, func(r rowScanner) (Lease, error) {
		var l Lease
		var at int64
		err := r.Scan(&l.Channel, &l.ChatKey, &l.Owner, &at)
		l.AcquiredAt = fromMS(at)
		return l, err
	}, sqlLeasesChats, owner)
	if err != nil {
		return nil, fmt.Errorf("store: leases of %s: %w", owner, err)
	}
	return append(roles, chats...), nil
}

// ClaimablePending returns up to limit (<= 0: 1000) pending inbox items,
// oldest first, of the chats owner may answer: those whose lease is free,
// owner's, or held by a replica dead for ttl. It only reads: the caller
// takes a chat with AcquireChat, then answers its items in id order.
func (s *Store) ClaimablePending(ctx context.Context, owner string, ttl time.Duration, limit int) ([]InboxItem, error) {
	return s.claimable(ctx, owner, ttl, limit, sqlClaimablePending, scanInboxItem)
}

// ClaimableRefs is ClaimablePending with each item's ID, Channel and
// ChatKey only: what a replica's poll needs to see which chats to take,
// every poll, without loading the messages.
func (s *Store) ClaimableRefs(ctx context.Context, owner string, ttl time.Duration, limit int) ([]InboxItem, error) {
	return s.claimable(ctx, owner, ttl, limit, sqlClaimableRefs, func(r rowScanner) (InboxItem, error) {
		var it InboxItem
		err := r.Scan(&it.ID, &it.Channel, &it.ChatKey)
		return it, err
	})
}

func (s *Store) claimable(ctx context.Context, owner string, ttl time.Duration, limit int,
	query string, scan func(rowScanner) (InboxItem, error)) ([]InboxItem, error) {
	if owner == "" {
		return nil, errors.New("store: claimable pending: empty owner")
	}
	bound, err := s.liveBound(ttl)
	if err != nil {
		return nil, fmt.Errorf("store: claimable pending for %s: %w", owner, err)
	}
	if limit <= 0 {
		limit = defaultClaimLimit
	}
	out, err := queryAll(ctx, s.db, scan, query, owner, bound, limit)
	if err != nil {
		return nil, fmt.Errorf("store: claimable pending for %s: %w", owner, err)
	}
	return out, nil
}

func scanInboxItem(r rowScanner) (InboxItem, error) {
	var it InboxItem
	var received int64
	err := r.Scan(&it.ID, &it.Channel, &it.ChatKey, &it.MessageID, &it.UserID, &it.Payload, &it.Status, &received)
	it.ReceivedAt = fromMS(received)
	return it, err
}

// InboxStatus returns the inbox item's status (InboxPending, InboxDone or
// InboxSkipped), or an error matching ErrNotFound.
func (s *Store) InboxStatus(ctx context.Context, id int64) (string, error) {
	var status string
	err := s.db.QueryRowContext(ctx, sqlInboxStatus, id).Scan(&status)
	if errors.Is(err, sql.ErrNoRows) {
		err = ErrNotFound
	}
	if err != nil {
		return "", fmt.Errorf("store: inbox status %d: %w", id, err)
	}
	return status, nil
}
