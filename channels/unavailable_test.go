package channels_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/channels"
)

// A rate limit's wait survives wrapping and marking again; a longer wait
// wins over a shorter or none.
func TestUnavailableFor(t *testing.T) {
	base := errors.New("429 Too Many Requests")
	tests := []struct {
		name string
		err  error
		want time.Duration
	}{
		{"not unavailable", base, 0},
		{"unavailable, no wait", channels.Unavailable(base), 0},
		{"with a wait", channels.UnavailableFor(base, 90*time.Second), 90 * time.Second},
		{"wrapped", fmt.Errorf("send part 1/1: %w", channels.UnavailableFor(base, 90*time.Second)), 90 * time.Second},
		{"marked again", channels.Unavailable(channels.UnavailableFor(base, 90*time.Second)), 90 * time.Second},
		{"a wait added", channels.UnavailableFor(channels.Unavailable(base), time.Minute), time.Minute},
		{"a shorter wait does not shorten it", channels.UnavailableFor(channels.UnavailableFor(base, time.Minute), time.Second), time.Minute},
	}
	for _, tt := range tests {
		if got := channels.RetryAfter(tt.err); got != tt.want {
			t.Errorf("%s: RetryAfter = %s, want %s", tt.name, got, tt.want)
		}
		if tt.name != "not unavailable" && (!errors.Is(tt.err, channels.ErrUnavailable) || !errors.Is(tt.err, base)) {
			t.Errorf("%s: %v lost its chain", tt.name, tt.err)
		}
	}
	if channels.UnavailableFor(nil, time.Second) != nil {
		t.Error("UnavailableFor(nil) is not nil")
	}
}
