package telegram

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/internal/tgfake"
)

// checkedParts is a channels.Parts in memory that checks each part is
// confirmed as soon as Telegram accepted it: before the next part is sent.
type checkedParts struct {
	t    *testing.T
	fake *tgfake.Fake
	base int // messages sent before this reply
	sent map[int]string
	got  []int
}

func (p *checkedParts) Sent(i int) (string, bool) {
	id, ok := p.sent[i]
	return id, ok
}

func (p *checkedParts) Confirmed(_ context.Context, i int, id string) {
	if n := len(p.fake.Sent()) - p.base; n != len(p.got)+1 {
		p.t.Errorf("part %d confirmed with %d new messages sent, want %d (confirmed at once)", i, n, len(p.got)+1)
	}
	if p.sent == nil {
		p.sent = map[int]string{}
	}
	p.sent[i], p.got = id, append(p.got, i)
}

// Each part of a long reply is recorded as Telegram accepts it; the same
// reply sent again after a crash between its parts sends only those not
// recorded, and a reply recorded whole sends nothing.
func TestSendRecordsAndSkipsParts(t *testing.T) {
	e := newEnv(t, nil)
	var b strings.Builder
	for b.Len() < 10500 {
		b.WriteString("A paragraph of a long answer that Telegram gets in three parts.\n\n")
	}
	text := b.String()
	rec := &checkedParts{t: t, fake: e.fake}
	last, err := e.a.Send(t.Context(), channels.Outbound{ChatID: "42", Text: text, Parts: rec})
	if err != nil {
		t.Fatal(err)
	}
	first := e.fake.Sent()
	if len(first) != 3 || !slices.Equal(rec.got, []int{0, 1, 2}) || last != itoa(first[2].MessageID) {
		t.Fatalf("sent %d parts, confirmed %v, returned %s; want 3 parts confirmed in order and the last id", len(first), rec.got, last)
	}

	// A restart after the first two parts: only the third goes out.
	resumed := &checkedParts{t: t, fake: e.fake, base: 3, sent: map[int]string{0: rec.sent[0], 1: rec.sent[1]}}
	last, err = e.a.Send(t.Context(), channels.Outbound{ChatID: "42", Text: text, ReplyTo: "7", Parts: resumed})
	if err != nil {
		t.Fatal(err)
	}
	sent := e.fake.Sent()
	if len(sent) != 4 || sent[3].Text != first[2].Text || sent[3].ReplyTo != 0 || last != itoa(sent[3].MessageID) || !slices.Equal(resumed.got, []int{2}) {
		t.Errorf("the resumed reply sent %d message(s) (want 1: the third part, replying to nothing), confirmed %v, returned %s", len(sent)-3, resumed.got, last)
	}

	// Recorded whole: nothing is sent, the last part's id comes back.
	last, err = e.a.Send(t.Context(), channels.Outbound{ChatID: "42", Text: text, Parts: rec})
	if err != nil || last != rec.sent[2] || len(e.fake.Sent()) != 4 {
		t.Errorf("a reply recorded whole: %d sent, returned %s, %v; want nothing sent and %s", len(e.fake.Sent())-4, last, err, rec.sent[2])
	}
}
