package main

import (
	"math"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/bench/internal/gateway"
)

// The slope is fitted to the samples from after on, in MB per hour.
func TestSlopeAfter(t *testing.T) {
	var s []sample
	for i := range 61 { // one a minute for an hour
		at := time.Duration(i) * time.Minute
		anon := 20 * 1024 // flat at 20 MB after minute 10...
		if i < 10 {
			anon = 10*1024 + i*1024 // ...climbing 1 MB a minute before
		}
		if i >= 10 {
			anon += (i - 10) * 1024 / 30 // ...then 2 MB an hour
		}
		s = append(s, sample{at: at, mem: gateway.Memory{Anon: anon}})
	}
	if got, n := slopeAfter(s, 10*time.Minute); math.Abs(got-2) > 0.05 || n != 51 {
		t.Errorf("slope after 10 min = %.2f MB/h over %d samples, want 2.00 over 51", got, n)
	}
	if all, n := slopeAfter(s, 0); all < 4 || n != 61 {
		t.Errorf("slope of all = %.2f MB/h over %d samples, want the early climb in it (> 4) over 61", all, n)
	}
	if _, n := slopeAfter(s[:1], 0); n != 1 {
		t.Errorf("one sample: n = %d", n)
	}
	if got, _ := slopeAfter(s[:1], 0); got != 0 {
		t.Errorf("one sample: slope %.2f, want 0", got)
	}
}
