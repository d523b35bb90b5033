package gcpace

import (
	"context"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/internal/waitfor"
)

// The limit is what the runtime holds besides the heap, the live heap, and
// the larger of the headroom and Many percent of live.
func TestLimitFor(t *testing.T) {
	const mb = 1 << 20
	tests := []struct {
		name                                 string
		live, total, released, free, objects uint64
		want                                 uint64
	}{
		// 40 MB mapped: 10 released, 12 free, 8 in objects: 10 besides.
		{"small heap: the headroom", 4 * mb, 40 * mb, 10 * mb, 12 * mb, 8 * mb, 10*mb + 4*mb + Headroom},
		{"big heap: Many percent of live", 100 * mb, 300 * mb, 10 * mb, 50 * mb, 200 * mb, 40*mb + 100*mb + 70*mb},
		{"counters out of step: no underflow", 4 * mb, 8 * mb, 10 * mb, 0, 0, 4*mb + Headroom},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := limitFor(tt.live, tt.total, tt.released, tt.free, tt.objects, Headroom); got != tt.want {
				t.Errorf("limitFor = %d MB, want %d MB", got/mb, tt.want/mb)
			}
		})
	}
}

// After each collection the limit is set again from the runtime's own
// figures: above the live heap by at least the headroom, far below
// "no limit".
func TestHeadroomFollowsCollections(t *testing.T) {
	got := make(chan int64, 16)
	h := newHeadroom(Headroom, func(v int64) int64 {
		select {
		case got <- v:
		default:
		}
		return 0
	})
	h.arm()
	defer h.stop()
	for range 2 { // each collection sets it, and arms the next
		runtime.GC()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		select {
		case v := <-got:
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			if v < Headroom || v > int64(ms.Sys)+Headroom+int64(ms.HeapAlloc) {
				t.Errorf("limit %d bytes, want at least the headroom (%d) and at most what the runtime holds plus it", v, Headroom)
			}
		case <-ctx.Done():
			t.Fatal("no limit set after a collection")
		}
		cancel()
	}
}

// New bounds the runtime's memory limit (it starts unlimited), Stop lifts
// it; with GOMEMLIMIT set, the operator's limit stands.
func TestNewSetsMemoryLimit(t *testing.T) {
	if _, ok := os.LookupEnv("GOGC"); ok {
		t.Fatal("GOGC is set in the test's environment: New would leave the GC alone")
	}
	p := New()
	runtime.GC()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := waitfor.Poll(ctx, time.Millisecond, func() bool { return debug.SetMemoryLimit(-1) < math.MaxInt64 })
	p.Stop()
	if err != nil {
		t.Fatal("the memory limit is still unlimited after a collection")
	}
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Errorf("memory limit %d after Stop, want none", got)
	}

	t.Setenv("GOMEMLIMIT", "1GiB")
	if h := startHeadroom(Headroom, os.LookupEnv); h != nil {
		h.stop()
		t.Error("startHeadroom follows the collections with GOMEMLIMIT set")
	}
}

// At Many the limit is off (Many's target bounds the growth), and on again
// once the pacer is back to Normal.
func TestHeadroomOffAtMany(t *testing.T) {
	var r recorder
	p := newPacer(r.set, r.free, r.first, r.wake, time.Hour)
	defer p.Stop()
	var limits []int64
	p.room = newHeadroom(Headroom, func(v int64) int64 { limits = append(limits, v); return 0 })
	p.Observe(Busy)
	p.Observe(Busy + 10)
	if len(limits) != 1 || limits[0] != math.MaxInt64 || !p.room.off.Load() {
		t.Fatalf("at Many: limits set %v, off %v; want one: none, off", limits, p.room.off.Load())
	}
	p.Observe(Calm)
	if p.room.off.Load() {
		t.Error("back at Normal: the headroom is still off")
	}
}
