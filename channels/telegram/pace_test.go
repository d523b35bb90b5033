package telegram

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/internal/tgfake"
	"github.com/switchboard-gateway/switchboard/internal/waitfor"
)

// These tests run against the fake with Telegram's documented limits
// (tgfake.DefaultLimits) in real time: 30 messages a second is what they
// measure. They run in parallel with each other.

func preview(ctx context.Context) context.Context {
	return channels.WithPriority(ctx, channels.PriorityPreview)
}

// A burst of 1,000 chats, one reply each, with a few chats getting three
// replies in a row: no 429 at all, every reply delivered, order kept in
// each chat, at about Telegram's 30 messages per second.
func TestPacingBurstOfAThousandChats(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	const chats, chatty, each = 1000, 10, 3
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, chats+chatty*each)
	for c := range chats {
		wg.Go(func() {
			chat := itoa(1000 + c)
			n := 1
			if c < chatty {
				n = each
			}
			for i := range n {
				if _, err := e.a.Send(t.Context(), channels.Outbound{ChatID: chat, Text: "reply " + itoa(i)}); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	close(errs)
	for err := range errs {
		t.Errorf("Send: %v", err)
	}
	if th := e.fake.Throttled(); len(th) != 0 {
		t.Errorf("%d calls answered 429, want none; first: %+v", len(th), th[0])
	}
	sent := e.fake.Sent()
	if want := chats + chatty*(each-1); len(sent) != want {
		t.Errorf("%d messages sent, want %d", len(sent), want)
	}
	next := map[int64]int{}
	for _, m := range sent {
		if want := "reply " + itoa(next[m.ChatID]); m.Text != want {
			t.Errorf("chat %d got %q, want %q (order within the chat)", m.ChatID, m.Text, want)
		}
		next[m.ChatID]++
	}
	// 1,020 messages at 30/s after a burst of 20: at least 33 s; this
	// also shows pacing did not just slow everything down to a crawl (the
	// upper bound leaves room for a loaded machine running -race).
	if min, max := 33*time.Second, 60*time.Second; took < min || took > max {
		t.Errorf("the burst took %v, want %v-%v at 30 messages/s", took, min, max)
	}
	st := e.a.PacingStats()
	t.Logf("%d messages to %d chats in %v (%.1f/s), 429s: %d, calls that waited: %d",
		len(sent), chats, took.Round(time.Millisecond), float64(len(sent))/took.Seconds(), len(e.fake.Throttled()), st.Waited)
}

// A long reply streamed as previews (drafts in a DM, edits of a preview
// message in a group) while it is written and while it is sent: no 429, the
// final reply is delivered whole, and the previews that did not fit were
// dropped, not queued.
func TestPacingLongReplyWithPreviews(t *testing.T) {
	t.Parallel()
	text := strings.Repeat("Streaming words arrive one after another. ", 110) // 4,620 characters: two messages
	for _, tt := range []struct {
		name   string
		chat   string
		drafts bool
	}{
		{"drafts in a DM", "42", true},
		{"edits in a group", "-1001", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, nil)
			previewID := ""
			if !tt.drafts {
				id, err := e.a.Send(preview(t.Context()), channels.Outbound{ChatID: tt.chat, Text: "…"})
				if err != nil {
					t.Fatalf("preview message: %v", err)
				}
				previewID = id
			}
			push := func(upTo int) error {
				if tt.drafts {
					return e.a.Draft(preview(t.Context()), tt.chat, 1, text[:upTo])
				}
				return e.a.Edit(preview(t.Context()), tt.chat, previewID, text[:upTo])
			}
			// The model writes 40 characters every 15 ms (the whole text in
			// about 1.7 s) and previews are pushed for every delta, then
			// keep being pushed while the reply is sent.
			stop, written, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
			var pushed, dropped int
			go func() {
				defer close(done)
				written := written
				upTo := 40
				tick := time.NewTicker(15 * time.Millisecond)
				defer tick.Stop()
				for {
					select {
					case <-stop:
						return
					case <-tick.C:
					}
					switch err := push(upTo); {
					case err == nil:
						pushed++
					case errors.Is(err, channels.ErrPaced):
						dropped++
					default:
						t.Errorf("preview: %v", err)
					}
					if upTo == len(text) && written != nil {
						close(written)
						written = nil
					}
					upTo = min(upTo+40, len(text))
				}
			}()
			<-written // the model wrote the whole text: time for previews to run into the limits
			start := time.Now()
			last, err := e.a.Send(t.Context(), channels.Outbound{ChatID: tt.chat, Text: text})
			took := time.Since(start)
			close(stop)
			<-done
			if err != nil {
				t.Fatalf("final reply: %v", err)
			}
			if th := e.fake.Throttled(); len(th) != 0 {
				t.Errorf("%d calls answered 429, want none: %+v", len(th), th)
			}
			var parts []string
			for _, m := range e.fake.Sent() {
				if itoa(m.MessageID) != previewID {
					parts = append(parts, m.Text)
				}
			}
			if got := strings.Join(parts, ""); len(parts) != 2 || strings.Join(strings.Fields(got), " ") != strings.TrimSpace(text) {
				t.Errorf("final reply arrived as %d parts, want the whole text in 2", len(parts))
			}
			if last == "" || pushed == 0 || dropped == 0 {
				t.Errorf("last id %q, previews shown %d, dropped %d: want some of each", last, pushed, dropped)
			}
			if tt.drafts && len(e.fake.Drafts()) != pushed {
				t.Errorf("fake saw %d drafts, adapter reported %d", len(e.fake.Drafts()), pushed)
			}
			t.Logf("previews shown %d, dropped %d; final reply in %v", pushed, dropped, took.Round(time.Millisecond))
		})
	}
}

func TestDraft(t *testing.T) {
	e := newEnv(t, nil)
	if err := e.a.Draft(t.Context(), "42", 7, "**Hel**lo"); err != nil {
		t.Fatalf("Draft in a DM: %v", err)
	}
	want := tgfake.Draft{ChatID: 42, DraftID: 7, Text: "<b>Hel</b>lo", ParseMode: "HTML"}
	if d := e.fake.Drafts(); len(d) != 1 || d[0] != want {
		t.Errorf("drafts = %+v, want %+v", d, want)
	}
	if err := e.a.Draft(t.Context(), "-100", 7, "hello"); !errors.Is(err, channels.ErrNoDrafts) {
		t.Errorf("Draft in a group = %v, want ErrNoDrafts", err)
	}
	if err := e.a.Draft(t.Context(), "42", 0, "hello"); err == nil {
		t.Error("Draft with id 0 succeeded")
	}
	if n := e.fake.Calls("sendMessageDraft"); n != 1 {
		t.Errorf("sendMessageDraft calls = %d, want 1 (groups and bad ids are not sent)", n)
	}

	e.fake.FailNext("sendMessageDraft", 400, "Bad Request: TEXTDRAFT_PEER_INVALID", 0)
	if err := e.a.Draft(t.Context(), "43", 1, "hello"); !errors.Is(err, channels.ErrNoDrafts) {
		t.Errorf("Draft refused by Telegram = %v, want ErrNoDrafts", err)
	}

	old := newEnv(t, func(f *tgfake.Fake, _ *Options) { f.Disable("sendMessageDraft") })
	for range 2 {
		if err := old.a.Draft(t.Context(), "42", 1, "hello"); !errors.Is(err, channels.ErrNoDrafts) {
			t.Errorf("Draft on a server without drafts = %v, want ErrNoDrafts", err)
		}
	}
	if n := old.fake.Calls("sendMessageDraft"); n != 1 {
		t.Errorf("sendMessageDraft calls = %d, want 1 (then no more tries)", n)
	}
}

// A long text's draft shows its last part, the one being written.
func TestDraftShowsTheLastPart(t *testing.T) {
	e := newEnv(t, nil)
	text := strings.Repeat("a", partLimit) + " the end"
	if err := e.a.Draft(t.Context(), "42", 1, text); err != nil {
		t.Fatal(err)
	}
	if d := e.fake.Drafts(); len(d) != 1 || !strings.HasSuffix(d[0].Text, "the end") || len(d[0].Text) > partLimit {
		t.Errorf("drafts = %+v, want the last part", d)
	}
}

func TestPacingDropsPreviewsNotReplies(t *testing.T) {
	var mu sync.Mutex
	hooked := map[string]int64{}
	e := newEnv(t, func(_ *tgfake.Fake, o *Options) {
		o.OnPaced = func(outcome string) { mu.Lock(); hooked[outcome]++; mu.Unlock() }
	})
	ctx := t.Context()
	if _, err := e.a.Send(ctx, channels.Outbound{ChatID: "42", Text: "one"}); err != nil {
		t.Fatal(err)
	}
	// The chat's bucket (burst 2) has one token left: the reserve for a
	// reply. A preview may not take it; typing (not a message) may.
	if err := e.a.Draft(preview(ctx), "42", 1, "draft"); !errors.Is(err, channels.ErrPaced) {
		t.Errorf("draft with the chat's reserve only = %v, want ErrPaced", err)
	}
	if err := e.a.Typing(ctx, "42"); err != nil {
		t.Errorf("Typing = %v, want it sent", err)
	}
	// Replies wait for their tokens, in order.
	start := time.Now()
	for _, s := range []string{"two", "three"} {
		if _, err := e.a.Send(ctx, channels.Outbound{ChatID: "42", Text: s}); err != nil {
			t.Fatal(err)
		}
	}
	if took := time.Since(start); took < 800*time.Millisecond {
		t.Errorf("two more replies took %v, want them paced at 1/s", took)
	}
	st := e.a.PacingStats()
	if st.Dropped != 1 || st.Waited < 1 {
		t.Errorf("stats = %+v, want 1 dropped, some waited", st)
	}
	mu.Lock()
	if hooked["dropped"] != st.Dropped || hooked["waited"] != st.Waited {
		t.Errorf("OnPaced saw %v, want the stats %+v", hooked, st)
	}
	mu.Unlock()
	// A reply waiting for a token gives up when its ctx ends.
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := e.a.Send(short, channels.Outbound{ChatID: "42", Text: "late"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Send with a short deadline = %v, want DeadlineExceeded", err)
	}
	if th := e.fake.Throttled(); len(th) != 0 {
		t.Errorf("429s: %+v", th)
	}
}

// Calls to one chat take their turns in the order they came; a preview
// does not wait for a busy chat.
func TestPacingTurnsInOrder(t *testing.T) {
	p := newPacer(DefaultPacing, nil)
	ctx := t.Context()
	first, err := p.enter(ctx, 42, channels.PriorityReply)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.enter(ctx, 42, channels.PriorityPreview); !errors.Is(err, channels.ErrPaced) {
		t.Errorf("preview into a busy chat = %v, want ErrPaced", err)
	}
	other, err := p.enter(ctx, 43, channels.PriorityPreview)
	if err != nil {
		t.Errorf("preview into another chat = %v", err)
	} else {
		other.leave()
	}
	queued := func() int {
		p.mu.Lock()
		defer p.mu.Unlock()
		return len(p.chats[42].queue)
	}
	order := make(chan int, 5)
	cancelled, cancel := context.WithCancel(ctx)
	for i := range 5 {
		c := ctx
		if i == 2 {
			c = cancelled
		}
		go func() {
			turn, err := p.enter(c, 42, channels.PriorityReply)
			if err != nil {
				order <- -i
				return
			}
			order <- i
			turn.leave()
		}()
		// Wait for it to queue before the next one comes.
		if err := waitfor.Poll(ctx, time.Millisecond, func() bool { return queued() == i+1 }); err != nil {
			t.Fatal(err)
		}
	}
	cancel()
	if got := <-order; got != -2 {
		t.Fatalf("first out = %d, want the cancelled call (-2)", got)
	}
	first.leave()
	var got []int
	for range 4 {
		got = append(got, <-order)
	}
	if want := []int{0, 1, 3, 4}; !slices.Equal(got, want) {
		t.Errorf("turns taken in order %v, want %v", got, want)
	}
}

// A 429 that still comes back is retried for a reply, as before pacing,
// and makes previews to that chat drop until its retry_after has passed.
func TestPacingAfterA429(t *testing.T) {
	e := newEnv(t, nil)
	e.fake.FailNext("sendMessage", 429, "", 30)
	if _, err := e.a.Send(t.Context(), channels.Outbound{ChatID: "42", Text: "hi"}); err != nil {
		t.Fatalf("Send after a 429: %v", err)
	}
	if w := e.sleep.recorded(); len(w) != 1 || w[0] != 30*time.Second {
		t.Errorf("waits = %v, want retry_after (30s)", w)
	}
	if err := e.a.Typing(t.Context(), "42"); !errors.Is(err, channels.ErrPaced) {
		t.Errorf("typing during retry_after = %v, want ErrPaced", err)
	}
	if err := e.a.Typing(t.Context(), "43"); err != nil {
		t.Errorf("typing in another chat = %v", err)
	}
}

// Requests held up on their way (a busy host, network jitter) must not pile
// up and then reach Telegram together: at most MaxInFlight are between
// their tokens and Telegram's answer; the others wait for a place, without
// taking tokens.
func TestPacingCapsRequestsOnTheirWay(t *testing.T) {
	p := newPacer(DefaultPacing, nil)
	const calls = 40
	gate := make(chan struct{})
	var mu sync.Mutex
	inFlight, most := 0, 0
	var wg sync.WaitGroup
	for c := range calls {
		wg.Go(func() {
			pc, err := p.enter(t.Context(), int64(100+c), channels.PriorityReply)
			if err != nil {
				t.Error(err)
				return
			}
			defer pc.leave()
			_, err = pc.do(t.Context(), "sendMessage", func() ([]byte, error) {
				mu.Lock()
				inFlight++
				most = max(most, inFlight)
				mu.Unlock()
				<-gate // held up on the way
				mu.Lock()
				inFlight--
				mu.Unlock()
				return nil, nil
			})
			if err != nil {
				t.Error(err)
			}
		})
	}
	// Every call is either on its way or waiting for a place.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	err := waitfor.Poll(ctx, time.Millisecond, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return inFlight == DefaultPacing.MaxInFlight && p.waited.Load() == calls-int64(DefaultPacing.MaxInFlight)
	})
	mu.Lock()
	n, most0 := inFlight, most
	mu.Unlock()
	close(gate)
	if err != nil {
		t.Errorf("never %d requests on their way and %d waiting for a place: %d on their way (at most %d), %d waited",
			DefaultPacing.MaxInFlight, calls-DefaultPacing.MaxInFlight, n, most0, p.waited.Load())
	}
	wg.Wait()
	if most != DefaultPacing.MaxInFlight {
		t.Errorf("%d requests were on their way at once, want at most %d", most, DefaultPacing.MaxInFlight)
	}
}

// Previews take only their share of the bot's rate: when many chats stream
// at once, most of the bot's bucket stays for their replies.
func TestPacingPreviewsTakeTheirShare(t *testing.T) {
	p := newPacer(DefaultPacing, nil)
	passed := 0
	for c := range 40 {
		pc, err := p.enter(t.Context(), int64(100+c), channels.PriorityPreview)
		if err != nil {
			t.Fatal(err)
		}
		_, err = pc.do(t.Context(), "sendMessageDraft", func() ([]byte, error) { return nil, nil })
		pc.leave()
		switch {
		case err == nil:
			passed++
		case !errors.Is(err, channels.ErrPaced):
			t.Fatalf("preview %d: %v", c, err)
		}
	}
	// 40 chats asking at once: the preview share's burst goes, the rest
	// are dropped (a few more may pass as the share refills meanwhile).
	if lo, hi := DefaultPacing.PreviewBurst, DefaultPacing.PreviewBurst+2; passed < lo || passed > hi {
		t.Errorf("%d of 40 previews went out at once, want %d-%d", passed, lo, hi)
	}
	if left, want := p.bot.TokensAt(time.Now()), float64(DefaultPacing.BotBurst-DefaultPacing.PreviewBurst-2); left < want {
		t.Errorf("the bot's bucket holds %.1f tokens after the previews, want at least %.0f for replies", left, want)
	}
}
