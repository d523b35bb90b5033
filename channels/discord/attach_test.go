package discord

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/switchboard-gateway/switchboard/internal/discordfake"
	"github.com/switchboard-gateway/switchboard/tools"
)

// countingTransport counts the requests it carries.
type countingTransport struct {
	base http.RoundTripper
	n    atomic.Int64
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.base.RoundTrip(r)
}

// guardedDownloads is the transport the gateway gives the adapter for
// attachments: web_fetch's outbound guard, allowing only the fake's base
// (as gateway/channels.go does for a configured api_base), counted.
func guardedDownloads(t *testing.T, apiBase string) *countingTransport {
	t.Helper()
	u, err := url.Parse(apiBase)
	if err != nil {
		t.Fatal(err)
	}
	return &countingTransport{base: tools.GuardedTransport([]string{u.Host}, nil, nil)}
}

// Issue 29: a message with 300 attachments has at most
// DefaultMaxAttachments read (and says how many were left out), and an
// attachment URL that is not Discord's CDN (another port on loopback, the
// metadata address, any other host) is never fetched.
func testAttachmentBounds(t *testing.T, f *discordfake.Fake, rec *recorder, downloads *countingTransport) {
	var internalHits atomic.Int64
	internal := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		internalHits.Add(1)
		_, _ = w.Write([]byte("internal secret"))
	}))
	t.Cleanup(internal.Close)

	file := f.AddFile("one.png", "image/png", []byte("\x89PNG"))
	var many []discordfake.Attachment
	for i := range 300 {
		a := file
		a.ID, a.Filename = fmt.Sprintf("%s-%d", file.ID, i), fmt.Sprintf("img-%d.png", i)
		many = append(many, a)
	}
	before := downloads.n.Load()
	m := f.MessageCreate("dm-att", "", "u1", "alice", "look", discordfake.WithAttachments(many...))
	f.Dispatch("MESSAGE_CREATE", m)
	in := rec.wait(t, m.ID)
	if got := downloads.n.Load() - before; got != DefaultMaxAttachments {
		t.Errorf("300 attachments made %d downloads, want %d", got, DefaultMaxAttachments)
	}
	if len(in.Attachments) != DefaultMaxAttachments || string(in.Attachments[0].Data) != "\x89PNG" {
		t.Errorf("got %d attachments (first %+v), want %d read", len(in.Attachments), in.Attachments[0], DefaultMaxAttachments)
	}
	if !strings.Contains(in.Text, "290 more attachments were left out") {
		t.Errorf("text = %q, want a note on the 290 left out", in.Text)
	}

	evil := []discordfake.Attachment{
		{ID: "e1", Filename: "a.png", ContentType: "image/png", Size: 10, URL: internal.URL + "/a.png"},
		{ID: "e2", Filename: "meta.txt", ContentType: "text/plain", Size: 10, URL: "http://169.254.169.254/latest/meta-data/iam"},
		{ID: "e3", Filename: "b.txt", ContentType: "text/plain", Size: 10, URL: "https://evil.example/b.txt"},
		{ID: "e4", Filename: "c.png", ContentType: "image/png", Size: 10, URL: "http://cdn.discordapp.com/" + strings.TrimPrefix(file.URL, discordfake.CDNBase+"/")},
	}
	before = downloads.n.Load()
	m = f.MessageCreate("dm-att", "", "u1", "alice", "and these", discordfake.WithAttachments(evil...))
	f.Dispatch("MESSAGE_CREATE", m)
	in = rec.wait(t, m.ID)
	if got := downloads.n.Load() - before; got != 0 || internalHits.Load() != 0 {
		t.Errorf("attachments off Discord's CDN made %d downloads (%d reached the internal server), want none", got, internalHits.Load())
	}
	if len(in.Attachments) != len(evil) {
		t.Fatalf("attachments = %+v", in.Attachments)
	}
	for _, a := range in.Attachments {
		if a.Data != nil || a.Text != "" || !strings.Contains(a.Note, "is not Discord's CDN") {
			t.Errorf("attachment %s = %+v, want not fetched with a note", a.Name, a)
		}
	}
}
