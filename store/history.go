package store

import (
	"container/list"
	"context"
	"fmt"
	"sort"
	"sync"
)

// historyBudget bounds the bytes of message text the history cache holds
// (about 128 sessions at an 8k-token context window); the least recently
// read sessions go first.
const historyBudget = 4 << 20

// historyCache keeps the messages a turn last read of each recent session,
// so that the next turn of the chat reads from the database only the
// messages stored since: every turn reads the history after the latest
// summary, and reading it whole again cost a long conversation a sixth of
// its CPU per message.
//
// It relies on two facts of the SQLite store: messages are never updated or
// deleted, and their ids grow in commit order (one writer at a time, across
// processes too), so a message not yet seen has an id above every id seen.
// Postgres hands out ids before commit, out of order, so the Postgres store
// has no cache.
type historyCache struct {
	mu     sync.Mutex
	budget int
	size   int
	lru    list.List // of *historyEntry, most recently read first
	byID   map[int64]*list.Element
}

// historyEntry holds every message of a session with floor < id <= last.
type historyEntry struct {
	session     int64
	floor, last int64
	msgs        []Message
	size        int
}

func newHistoryCache(budget int) *historyCache {
	return &historyCache{budget: budget, byID: make(map[int64]*list.Element)}
}

// get returns the cached messages of the session with id > after, and the
// id up to which the cache is complete; ok is false when the cache cannot
// answer (no entry, or after is below its floor). The slice is shared:
// callers must not modify its elements.
func (c *historyCache) get(session, after int64) (msgs []Message, last int64, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, found := c.byID[session]
	if !found {
		return nil, 0, false
	}
	e := el.Value.(*historyEntry)
	if after < e.floor {
		return nil, 0, false
	}
	c.lru.MoveToFront(el)
	return e.view(after), max(e.last, after), true
}

// view is the entry's messages with id > after, shared: its capacity ends
// at its length, so appending to it copies, and the entry only ever
// appends past it or replaces its array.
func (e *historyEntry) view(after int64) []Message {
	i := firstAfter(e.msgs, after)
	return e.msgs[i:len(e.msgs):len(e.msgs)]
}

// put records that fresh are every message of the session with
// from < id <= upTo. When the session's entry was complete up to from, they
// extend it; otherwise they replace it. Messages at or below floor are
// dropped: the reader asked only for those above it (a summary covers the
// rest), and so will the next turn. It returns the entry's messages above
// floor (shared, as with get), or ok false if the entry was not kept or
// does not hold them all.
func (c *historyCache) put(session, floor, from, upTo int64, fresh []Message) (msgs []Message, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var e *historyEntry
	if el, found := c.byID[session]; found {
		e = el.Value.(*historyEntry)
		if e.floor <= from && e.last == from {
			c.lru.MoveToFront(el)
		} else {
			c.drop(el)
			e = nil
		}
	}
	if e == nil {
		e = &historyEntry{session: session, floor: from, last: from}
		c.byID[session] = c.lru.PushFront(e)
	}
	if i := firstAfter(e.msgs, floor); i > 0 {
		for _, m := range e.msgs[:i] {
			n := messageSize(m)
			e.size -= n
			c.size -= n
		}
		e.msgs = append([]Message(nil), e.msgs[i:]...)
	}
	// The entry answers the reader only if it holds every message above
	// floor: not if it was dropped or moved up since the reader's get.
	covers := e.floor <= floor
	e.floor = max(e.floor, floor)
	for _, m := range fresh {
		n := messageSize(m)
		e.size += n
		c.size += n
	}
	e.msgs = append(e.msgs, fresh...)
	e.last = upTo
	if e.size > c.budget { // it alone would push out every other session
		c.drop(c.byID[session])
		return nil, false
	}
	for c.size > c.budget && c.lru.Len() > 1 {
		c.drop(c.lru.Back())
	}
	if !covers {
		return nil, false
	}
	return e.view(floor), true
}

func (c *historyCache) drop(el *list.Element) {
	e := c.lru.Remove(el).(*historyEntry)
	delete(c.byID, e.session)
	c.size -= e.size
}

// firstAfter is the index of the first message with id > after (msgs are
// in id order).
func firstAfter(msgs []Message, after int64) int {
	return sort.Search(len(msgs), func(i int) bool { return msgs[i].ID > after })
}

// messageSize approximates the bytes a cached message holds.
func messageSize(m Message) int {
	n := 128 + len(m.Content) + len(m.ToolCallID) + len(m.Name)
	for _, tc := range m.ToolCalls {
		n += 48 + len(tc.ID) + len(tc.Name) + len(tc.Arguments)
	}
	for _, im := range m.Images {
		n += 48 + len(im.MIME) + len(im.URL) + len(im.Data)
	}
	return n
}

// MessagesAfter returns the session's messages with id > afterID, in order
// (e.g. after a compaction summary's upToMessageID). On SQLite it reads
// only what the history cache does not hold yet, and the messages it
// returns are shared with the cache: callers must not modify them.
func (s *Store) MessagesAfter(ctx context.Context, sessionID, afterID int64) ([]Message, error) {
	if s.history == nil {
		return s.queryMessages(ctx, sessionID, afterID)
	}
	cached, last, ok := s.history.get(sessionID, afterID)
	if !ok {
		last = afterID
	}
	fresh, err := s.queryMessages(ctx, sessionID, last)
	if err != nil {
		return nil, err
	}
	upTo := last
	if n := len(fresh); n > 0 {
		upTo = fresh[n-1].ID
	}
	if all, ok := s.history.put(sessionID, afterID, last, upTo, fresh); ok {
		return all, nil
	}
	if len(cached) == 0 {
		return fresh, nil
	}
	return append(cached, fresh...), nil
}

func (s *Store) queryMessages(ctx context.Context, sessionID, afterID int64) ([]Message, error) {
	out, err := queryAll(ctx, s.db, scanMessage, sqlMessages, sessionID, afterID)
	if err != nil {
		return nil, fmt.Errorf("store: messages of session %d: %w", sessionID, err)
	}
	return out, nil
}
