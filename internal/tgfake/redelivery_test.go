package tgfake

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"testing"
)

// poll calls getUpdates as a bare HTTP client would, a process of its own
// each time: nothing of an earlier poll is kept but what the fake keeps.
func poll(t *testing.T, f *Fake, offset int) []int {
	t.Helper()
	resp, err := http.PostForm(f.URL+"/bot"+token+"/getUpdates", url.Values{"offset": {strconv.Itoa(offset)}, "timeout": {"0"}})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var a struct {
		OK     bool `json:"ok"`
		Result []struct {
			UpdateID int `json:"update_id"`
		} `json:"result"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil || !a.OK {
		t.Fatalf("getUpdates offset %d: ok %v, %v", offset, a.OK, err)
	}
	ids := []int{}
	for _, u := range a.Result {
		ids = append(ids, u.UpdateID)
	}
	return ids
}

// An update is handed out again, to any poller, until a later getUpdates
// confirms it with an offset above its id: a process that dies after
// receiving updates and before confirming them gets them back when it
// restarts. A confirmed update never comes back, not even to a poll with a
// lower offset.
func TestUpdatesRedeliveredUntilConfirmed(t *testing.T) {
	f := New(t, token)
	u1, _ := f.PushText(42, 42, "ada", "one")
	u2, _ := f.PushText(43, 43, "bob", "two")
	both := []int{u1, u2}

	for _, step := range []struct {
		what    string
		offset  int
		want    []int
		pending int
	}{
		{"first poll", 0, both, 2},
		{"the next process, nothing confirmed", 0, both, 2},
		{"an offset equal to the first id confirms nothing", u1, both, 2},
		{"an offset above the first id confirms it only", u1 + 1, []int{u2}, 1},
		{"a restart from offset 0 gets the unconfirmed one only", 0, []int{u2}, 1},
		{"a lower offset brings nothing confirmed back", u1 - 5, []int{u2}, 1},
		{"an offset above the last confirms all", u2 + 1, []int{}, 0},
		{"a restart from offset 0 after all were confirmed", 0, []int{}, 0},
	} {
		if got := poll(t, f, step.offset); !slices.Equal(got, step.want) {
			t.Errorf("%s (offset %d): updates %v, want %v", step.what, step.offset, got, step.want)
		}
		if n := f.Pending(); n != step.pending {
			t.Errorf("%s: %d pending, want %d", step.what, n, step.pending)
		}
	}
}
