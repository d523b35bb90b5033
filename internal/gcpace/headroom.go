package gcpace

import (
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
)

// Headroom bounds how far the heap grows between two collections: at most
// Headroom or Many percent of what was live, whichever is more, and never
// more than the GC target allows. At a GC target of 400 % (Normal once)
// the heap grew by four times what was live, and what a busy gateway keeps
// live (the history cache, the turns running) grows with the traffic:
// under 20 chats sending steadily, RssAnon followed the live heap times
// five up and up (issue 31's +68 MB/h with no plateau); at 100 % it still
// doubles. With the growth capped at a fixed size, a small heap
// still gets its room (the collector runs no more often than every
// Headroom of allocation) and a big one its Many percent, and the memory
// between collections stays flat when the live heap moves.
//
// It is done with the runtime's soft memory limit, set after each
// collection to what the runtime holds besides the heap, plus the live heap
// and the headroom: the collector starts before the heap passes it, and the
// scavenger hands back the free pages above it.
const Headroom = 3 << 20

// headroom keeps the soft memory limit at the live heap plus the headroom,
// from one collection to the next.
type headroom struct {
	bytes   uint64
	stopped atomic.Bool
	off     atomic.Bool // at Many: no limit until follow(true)
	samples []metrics.Sample
	set     func(int64) int64 // debug.SetMemoryLimit
}

// metrics read after each collection, in this order.
var headroomMetrics = []string{
	"/gc/heap/live:bytes",
	"/memory/classes/total:bytes",
	"/memory/classes/heap/released:bytes",
	"/memory/classes/heap/free:bytes",
	"/memory/classes/heap/objects:bytes",
}

// startHeadroom begins following the collections, or returns nil if the
// operator set GOMEMLIMIT (their limit stands).
func startHeadroom(bytes uint64, lookupEnv func(string) (string, bool)) *headroom {
	if _, ok := lookupEnv("GOMEMLIMIT"); ok {
		return nil
	}
	h := newHeadroom(bytes, debug.SetMemoryLimit)
	h.arm()
	return h
}

func newHeadroom(bytes uint64, set func(int64) int64) *headroom {
	h := &headroom{bytes: bytes, set: set}
	for _, name := range headroomMetrics {
		h.samples = append(h.samples, metrics.Sample{Name: name})
	}
	return h
}

// stop lifts the limit; the next collection no longer sets it.
func (h *headroom) stop() {
	if h == nil {
		return
	}
	h.stopped.Store(true)
	h.set(math.MaxInt64)
}

// follow turns the limit on or off (off: none). At Many, with a thousand
// turns arriving, the limit of the collection before them would make the
// collector run again and again until the next ones caught up; Many's 70 %
// bounds the heap's growth there anyway.
func (h *headroom) follow(on bool) {
	if h == nil || h.off.Load() == !on {
		return
	}
	h.off.Store(!on)
	if !on {
		h.set(math.MaxInt64)
	}
}

// sentinel is garbage from its birth: its finalizer runs after the next
// collection. (It holds a pointer so that it is not a tiny allocation,
// whose finalizers may never run.)
type sentinel struct{ _ *int }

// arm sets the limit after the next collection, and arms again there.
func (h *headroom) arm() {
	runtime.SetFinalizer(&sentinel{}, func(*sentinel) {
		if h.stopped.Load() {
			return
		}
		if !h.off.Load() {
			h.adjust()
		}
		h.arm()
	})
}

// adjust sets the limit from the metrics of the collection just ended.
func (h *headroom) adjust() {
	metrics.Read(h.samples)
	v := make([]uint64, len(h.samples))
	for i, s := range h.samples {
		if s.Value.Kind() != metrics.KindUint64 {
			return // an older runtime without one of them: leave the limit
		}
		v[i] = s.Value.Uint64()
	}
	h.set(int64(limitFor(v[0], v[1], v[2], v[3], v[4], h.bytes)))
}

// limitFor is the memory limit for a live heap of live bytes with headroom
// bytes to grow into: what the runtime holds besides the heap's objects and
// free pages (stacks, metadata, fragmentation), the live heap, and the
// larger of headroom and Many percent of live.
func limitFor(live, total, released, free, objects, headroom uint64) uint64 {
	held := total - min(released, total)
	other := held - min(free+objects, held)
	return other + live + max(headroom, live*Many/100)
}
