package gcpace

import (
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// recorder records the targets set and the times memory was freed (from
// the pacer's timer goroutine).
type recorder struct {
	mu      sync.Mutex
	targets []int
	frees   int
	hooks   int // OnQuiet calls, each checked to come before its free
	firsts  int // the first-quiet-only calls (the binary paged out)
	wakes   int // the first turn after it (the binary's read-around back)
}

func (r *recorder) set(v int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.targets = append(r.targets, v)
	return 100
}

func (r *recorder) free() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.frees++
}

func (r *recorder) first() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.firsts++
}

func (r *recorder) wake() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.wakes++
}

// hook is an OnQuiet hook that checks it runs before its free.
func (r *recorder) hook(t *testing.T) func() {
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.hooks != r.frees {
			t.Errorf("OnQuiet hook %d ran after %d frees, want before its free", r.hooks+1, r.frees)
		}
		r.hooks++
	}
}

// seen returns what was recorded.
func (r *recorder) seen() (targets []int, frees, hooks int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.targets), r.frees, r.hooks
}

// Normal from the start; Many from Busy turns at once until they are back
// to Calm. (Quiet is far away here: the idle policy is TestPacerIdle's.)
func TestPacer(t *testing.T) {
	var r recorder
	p := newPacer(r.set, r.free, r.first, r.wake, time.Hour)
	for _, n := range []int{0, 1, 10, Busy - 1, Busy, Busy + 500, Busy, Calm + 1, Calm, 3, 0, Busy, 0} {
		p.Observe(n)
	}
	p.Observe(Busy)
	p.Stop()
	p.Observe(Busy)
	p.Stop()
	targets, frees, _ := r.seen()
	if want := []int{Normal, Many, Normal, Many, Normal, Many, 100}; !slices.Equal(targets, want) {
		t.Errorf("targets set %v, want %v (the last: the process's own, back at Stop)", targets, want)
	}
	if frees != 0 {
		t.Errorf("memory freed %d times before Quiet, want 0", frees)
	}
}

// Quiet after start, and Quiet after the last turn of a conversation or a
// burst ended, the target goes to Idle and memory back to the system, once
// (and the first time only, the binary's pages);
// a turn puts Normal back. The timer starts over at each turn's end, so a
// conversation's back-and-forth pays nothing; a gateway that stays idle
// does nothing more (no polling). The clock is synctest's.
func TestPacerIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var r recorder
		p := newPacer(r.set, r.free, r.first, r.wake, Quiet)
		defer p.Stop()
		p.OnQuiet(r.hook(t))
		step := func(what string, d time.Duration, wantTargets []int, wantFrees int) {
			t.Helper()
			elapse(d)
			synctest.Wait()
			if targets, frees, _ := r.seen(); !slices.Equal(targets, wantTargets) || frees != wantFrees {
				t.Fatalf("%s: targets %v, frees %d; want %v, %d", what, targets, frees, wantTargets, wantFrees)
			}
			// The binary is paged out at the first quiet time only: later
			// ones keep the pages the turns run.
			// Its read-around is back at the first turn after that.
			r.mu.Lock()
			firsts, wakes := r.firsts, r.wakes
			r.mu.Unlock()
			if want := min(wantFrees, 1); firsts != want {
				t.Fatalf("%s: the binary paged out %d times, want %d (at the first quiet time only)", what, firsts, want)
			}
			if want := min(max(len(wantTargets)-2, 0), 1); wakes != want {
				t.Fatalf("%s: the binary's read-around restored %d times, want %d (at the first turn after the page-out)", what, wakes, want)
			}
		}
		step("just before Quiet after start", Quiet-time.Millisecond, []int{Normal}, 0)
		step("Quiet after start", time.Millisecond, []int{Normal, Idle}, 1)
		step("idle an hour", time.Hour, []int{Normal, Idle}, 1)

		p.Observe(1) // a conversation: turns with pauses shorter than Quiet
		step("a long turn", 10*Quiet, []int{Normal, Idle, Normal}, 1)
		for range 5 {
			p.Observe(0)
			step("a pause in the conversation", Quiet-time.Millisecond, []int{Normal, Idle, Normal}, 1)
			p.Observe(1)
			p.Observe(2)
		}
		p.Observe(0)
		step("Quiet after the conversation", Quiet, []int{Normal, Idle, Normal, Idle}, 2)
		step("idle a day", 24*time.Hour, []int{Normal, Idle, Normal, Idle}, 2)

		p.Observe(Busy) // a burst
		p.Observe(Busy + 100)
		p.Observe(Calm)
		p.Observe(0)
		step("Quiet after the burst", Quiet, []int{Normal, Idle, Normal, Idle, Many, Normal, Idle}, 3)

		p.Observe(1)
		p.Observe(0)
		p.Stop()
		step("stopped", time.Hour, []int{Normal, Idle, Normal, Idle, Many, Normal, Idle, Normal, 100}, 3)
		p.Observe(1)
		p.Observe(0)
		step("observed after Stop", time.Hour, []int{Normal, Idle, Normal, Idle, Many, Normal, Idle, Normal, 100}, 3)
		if _, _, hooks := r.seen(); hooks != 3 {
			t.Errorf("OnQuiet hooks ran %d times, want 3 (once per quiet)", hooks)
		}
	})
}

// An operator's GOGC stands, and a nil Pacer does nothing.
func TestPacerLeavesGOGC(t *testing.T) {
	t.Setenv("GOGC", "200")
	p := New()
	if p != nil {
		t.Fatal("New returned a Pacer with GOGC set")
	}
	p.Observe(Busy * 10)
	p.OnQuiet(func() {})
	p.Stop()
}

// The binary's read-only mappings are the ones paged out; its writable
// data, other files and anonymous memory are not.
func TestReadOnlyMappings(t *testing.T) {
	maps := []byte(`00400000-00ff9000 r-xp 00000000 fe:00 10126055   /srv/switchboard
00ff9000-01d60000 r--p 00bf9000 fe:00 10126055   /srv/switchboard
01d63000-01ead000 rw-p 01963000 fe:00 10126055   /srv/switchboard
01ead000-03ef5000 rw-p 00000000 00:00 0
7f20c289c000-7f20c29f2000 r-xp 00026000 fe:00 326269   /usr/lib/x86_64-linux-gnu/libc.so.6
7f20c3000000-7f20c3001000 r--p 00000000 fe:00 10126056   /srv/switchboard-other
`)
	var got [][2]uint64
	for lo, hi := range readOnlyMappings(maps, "/srv/switchboard") {
		got = append(got, [2]uint64{lo, hi})
	}
	want := [][2]uint64{{0x400000, 0xff9000}, {0xff9000, 0x1d60000}}
	if !slices.Equal(got, want) {
		t.Errorf("mappings %x, want %x", got, want)
	}
}

// elapse lets d of the synctest bubble's virtual clock pass (no real time).
func elapse(d time.Duration) { <-time.After(d) }
