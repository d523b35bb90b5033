package gcpace

import (
	"slices"
	"testing"
)

// Normal from the start; Many from Busy turns at once until they are back
// to Calm.
func TestPacer(t *testing.T) {
	var calls []int
	p := newPacer(func(v int) int {
		calls = append(calls, v)
		return 100
	})
	for _, n := range []int{0, 1, 10, Busy - 1, Busy, Busy + 500, Busy, Calm + 1, Calm, 3, 0, Busy, 0} {
		p.Observe(n)
	}
	p.Observe(Busy)
	p.Stop()
	p.Observe(Busy)
	p.Stop()
	if want := []int{Normal, Many, Normal, Many, Normal, Many, 100}; !slices.Equal(calls, want) {
		t.Errorf("targets set %v, want %v (the last: the process's own, back at Stop)", calls, want)
	}
}

// An operator's GOGC stands, and a nil Pacer does nothing.
func TestPacerLeavesGOGC(t *testing.T) {
	t.Setenv("GOGC", "200")
	p := New()
	if p != nil {
		t.Fatal("New returned a Pacer with GOGC set")
	}
	p.Observe(Busy * 10)
}
