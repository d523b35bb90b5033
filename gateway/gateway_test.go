package gateway

import (
	"slices"
	"testing"
)

// The cleanup stack undoes last first, once.
func TestCleanupRunsLastFirst(t *testing.T) {
	var c cleanup
	var got []string
	for _, name := range []string{"store", "mcp", "learner", "pacer"} {
		c.push(func() { got = append(got, name) })
	}
	c.run()
	c.run()
	if want := []string{"pacer", "learner", "mcp", "store"}; !slices.Equal(got, want) {
		t.Errorf("undone %q, want %q once", got, want)
	}
}
