package discord

import (
	"context"
	"maps"
	"slices"
	"sync"
	"testing"

	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/internal/discordfake"
)

// memParts is a channels.Parts in memory.
type memParts struct {
	mu   sync.Mutex
	sent map[int]string
	got  []int // the parts confirmed, in order
}

func (p *memParts) Sent(i int) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	id, ok := p.sent[i]
	return id, ok
}

func (p *memParts) Confirmed(_ context.Context, i int, id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.sent == nil {
		p.sent = map[int]string{}
	}
	p.sent[i] = id
	p.got = append(p.got, i)
}

func newRESTAdapter(t *testing.T, f *discordfake.Fake) *Adapter {
	t.Helper()
	a, err := New(Options{Token: f.Token, APIBase: f.APIBase(), Sleep: (&sleeper{}).sleep})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// A process restarted after a crash sends the same answer to the same
// message again (it has no memory of the first send): the nonce with
// enforce_nonce makes Discord return the message it has, so the channel
// shows one.
func TestResendAfterRestartIsOneMessage(t *testing.T) {
	f := discordfake.New(t)
	f.AddChannel("dm-9", discordfake.ChannelTypeDM, "", "")
	ctx := channels.WithInbound(waitCtx(t), channels.Inbound{Channel: "discord", ChatID: "dm-9", MessageID: "1234"})
	out := channels.Outbound{ChatID: "dm-9", Text: "the answer"}
	first, err := newRESTAdapter(t, f).Send(ctx, out)
	if err != nil {
		t.Fatal(err)
	}
	again, err := newRESTAdapter(t, f).Send(ctx, out)
	if err != nil {
		t.Fatal(err)
	}
	if sent := f.SentTo("dm-9"); len(sent) != 1 || again != first {
		t.Errorf("after a resend: %d message(s), ids %s and %s; want one message, the same id", len(sent), first, again)
	}
	if got := f.Requests(discordfake.RouteCreateMessage); got != 2 {
		t.Errorf("message posts = %d, want 2 (the resend reached Discord)", got)
	}
	// Another answer to the same message is another message.
	if _, err := newRESTAdapter(t, f).Send(ctx, channels.Outbound{ChatID: "dm-9", Text: "a second answer"}); err != nil {
		t.Fatal(err)
	}
	if sent := f.SentTo("dm-9"); len(sent) != 2 {
		t.Errorf("%d messages, want 2", len(sent))
	}
}

// With a part record, each part is recorded as Discord accepts it, and a
// send of the same reply after a restart posts only the parts not recorded.
func TestSendSkipsRecordedParts(t *testing.T) {
	f := discordfake.New(t)
	f.AddChannel("dm-7", discordfake.ChannelTypeDM, "", "")
	text := longReply()
	parts := splitMessage(text, splitLimit)
	if len(parts) < 3 {
		t.Fatalf("the long reply has %d parts, want at least 3", len(parts))
	}
	rec := &memParts{}
	// The first process: the parts before the last go out, then it dies.
	a := newRESTAdapter(t, f)
	for i := range parts[:len(parts)-1] {
		id, err := a.Send(waitCtx(t), channels.Outbound{ChatID: "dm-7", Text: parts[i]})
		if err != nil {
			t.Fatal(err)
		}
		rec.Confirmed(t.Context(), i, id)
	}
	before := f.Requests(discordfake.RouteCreateMessage)
	rec.got = nil

	last, err := newRESTAdapter(t, f).Send(waitCtx(t), channels.Outbound{ChatID: "dm-7", Text: text, Parts: rec})
	if err != nil {
		t.Fatal(err)
	}
	sent := f.SentTo("dm-7")
	if got := f.Requests(discordfake.RouteCreateMessage) - before; got != 1 {
		t.Errorf("the resumed send posted %d messages, want 1 (the last part)", got)
	}
	if len(sent) != len(parts) || sent[len(sent)-1].Content != parts[len(parts)-1] || last != sent[len(sent)-1].ID {
		t.Errorf("sent %d messages (last id %s, returned %s), want the %d parts once", len(sent), sent[len(sent)-1].ID, last, len(parts))
	}
	if want := []int{len(parts) - 1}; !slices.Equal(rec.got, want) {
		t.Errorf("confirmed parts %v, want %v", rec.got, want)
	}
	// All parts recorded: nothing is posted, the last part's id returned.
	ids := maps.Clone(rec.sent)
	id, err := newRESTAdapter(t, f).Send(waitCtx(t), channels.Outbound{ChatID: "dm-7", Text: text, Parts: rec})
	if err != nil || id != ids[len(parts)-1] || len(f.SentTo("dm-7")) != len(parts) {
		t.Errorf("a send of a reply sent whole: id %s, %v, %d messages; want the last part's id %s and nothing posted",
			id, err, len(f.SentTo("dm-7")), ids[len(parts)-1])
	}
}
