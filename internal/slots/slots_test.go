package slots

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// order records the order in which waiters got their slot.
type order struct {
	mu  sync.Mutex
	got []string
}

func (o *order) add(name string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.got = append(o.got, name)
}

func (o *order) list() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.got)
}

// Waiters get the slot in the order they came, background work after
// everyone else even when it came first.
func TestFirstComeFirstServed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(1)
		if err := s.Acquire(t.Context(), Wait{}); err != nil {
			t.Fatal(err)
		}
		var o order
		var wg sync.WaitGroup
		for _, w := range []struct {
			name       string
			background bool
		}{{"learn1", true}, {"a", false}, {"b", false}, {"learn2", true}, {"c", false}} {
			wg.Go(func() {
				if err := s.Acquire(t.Context(), Wait{Background: w.background}); err != nil {
					t.Error(err)
					return
				}
				o.add(w.name)
				s.Release()
			})
			synctest.Wait() // in line before the next comes
		}
		if n := s.Waiting(); n != 5 {
			t.Fatalf("%d waiting, want 5", n)
		}
		s.Release()
		wg.Wait()
		if got, want := o.list(), []string{"a", "b", "c", "learn1", "learn2"}; !slices.Equal(got, want) {
			t.Errorf("served %v, want %v", got, want)
		}
		if err := s.Acquire(t.Context(), Wait{}); err != nil { // all given back
			t.Fatal(err)
		}
	})
}

// A waiter still in line after Wait.After is told once how many wait
// ahead of it; one served sooner is told nothing.
func TestNotifyAfterARealWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(2)
		for range 2 {
			if err := s.Acquire(t.Context(), Wait{}); err != nil {
				t.Fatal(err)
			}
		}
		var mu sync.Mutex
		told := map[string][]int{}
		var wg sync.WaitGroup
		for _, name := range []string{"first", "second", "third"} {
			wg.Go(func() {
				err := s.Acquire(t.Context(), Wait{After: 2 * time.Second, Notify: func(ahead int) {
					mu.Lock()
					defer mu.Unlock()
					told[name] = append(told[name], ahead)
				}})
				if err != nil {
					t.Error(err)
				}
			})
			synctest.Wait()
		}
		elapse(time.Second) // virtual: a slot comes back before anyone waited 2 s
		s.Release()
		elapse(5 * time.Second)
		synctest.Wait()
		mu.Lock()
		if len(told["first"]) != 0 || !slices.Equal(told["second"], []int{0}) || !slices.Equal(told["third"], []int{1}) {
			t.Errorf("told %v, want second 0 ahead and third 1, once each; first nothing", told)
		}
		mu.Unlock()
		s.Release()
		s.Release()
		wg.Wait()
	})
}

// full returns one slot, taken, and a waiter in line for it whose context
// cancel ends; its Acquire's error arrives on errc.
func full(t *testing.T) (s *Slots, cancel context.CancelFunc, errc <-chan error) {
	s = New(1)
	if err := s.Acquire(t.Context(), Wait{}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	ec := make(chan error, 1)
	go func() { ec <- s.Acquire(ctx, Wait{}) }()
	synctest.Wait()
	return s, cancel, ec
}

// A waiter whose context ends leaves the line without a slot, and the
// next one moves up.
func TestCancelledWaiterLeavesTheLine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, cancel, errc := full(t)
		got := make(chan struct{})
		go func() {
			if err := s.Acquire(t.Context(), Wait{}); err == nil {
				close(got)
			}
		}()
		synctest.Wait()
		cancel()
		if err := <-errc; err != context.Canceled {
			t.Fatalf("cancelled Acquire = %v, want context.Canceled", err)
		}
		if n := s.Waiting(); n != 1 {
			t.Fatalf("%d waiting after the cancel, want 1", n)
		}
		s.Release()
		<-got
	})
}

// A slot handed to a waiter whose context ends at the same moment is
// either taken or given back, never lost (the select picks either way, so
// the race is run many times).
func TestHandedOverWhileCancelled(t *testing.T) {
	for range 50 {
		synctest.Test(t, func(t *testing.T) {
			s, cancel, errc := full(t)
			s.Release() // both happen before the waiter runs again
			cancel()
			if err := <-errc; err == nil {
				s.Release() // it took the slot: give it back
			}
			if s.free != 1 || s.Waiting() != 0 {
				t.Fatalf("free %d, waiting %d; want the slot back", s.free, s.Waiting())
			}
		})
	}
}

// elapse lets d of the synctest bubble's virtual clock pass (no real time).
func elapse(d time.Duration) { <-time.After(d) }
