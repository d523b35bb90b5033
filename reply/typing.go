package reply

import (
	"context"
	"sync"
	"time"

	"github.com/switchboard-gateway/switchboard/channels"
)

const (
	// typingDelay is how long a turn runs before it shows a typing
	// indicator: an answer within it (a command, a quick model) needs none.
	typingDelay = 500 * time.Millisecond
	// typingEvery refreshes typing indicators; Telegram shows one for ~5 s.
	typingEvery = 4 * time.Second
	// typingInFlight bounds the typing indicators being sent at once on a
	// channel. They are cosmetic: in a burst, a beat that finds them all
	// taken is skipped (the next comes typingEvery later) instead of
	// competing with the replies for connections and the platform's rate
	// limit (Telegram answers 429 past about 30 requests a second).
	typingInFlight = 8
)

// Typing shows the channel's typing indicator from typingDelay on
// until the returned stop function is called. A reply that comes sooner
// needs none: Telegram's documentation recommends the indicator only when
// a response "will take a noticeable amount of time", and each one is a
// request against the platform's rate limit.
func (s *Sender) Typing(ctx context.Context, in channels.Inbound) func() {
	typer, ok := s.cfg.Channel(in.Channel).(channels.Typer)
	s.mu.Lock()
	slots := s.typing[in.Channel]
	if ok && slots == nil {
		slots = make(chan struct{}, typingInFlight)
		s.typing[in.Channel] = slots
	}
	s.mu.Unlock()
	if !ok {
		return func() {}
	}
	// A goroutine only while an indicator is being sent, and a timer in
	// between: a thousand turns waiting for the model hold no goroutine
	// (and no stack) for their typing indicators.
	ctx, cancel := context.WithCancel(ctx)
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		timer   *time.Timer
		stopped bool
		beat    func()
	)
	beat = func() {
		defer wg.Done()
		select {
		case slots <- struct{}{}:
			if err := typer.Typing(ctx, in.ChatID); err != nil && ctx.Err() == nil {
				s.log.Debug("typing indicator", "channel", in.Channel, "err", err)
			}
			<-slots
		default: // typingInFlight already being sent: skip this beat
		}
		mu.Lock()
		defer mu.Unlock()
		if !stopped {
			wg.Add(1)
			timer = time.AfterFunc(typingEvery, beat)
		}
	}
	wg.Add(1)
	mu.Lock()
	timer = time.AfterFunc(typingDelay, beat)
	mu.Unlock()
	return func() {
		cancel()
		mu.Lock()
		stopped = true
		if timer != nil && timer.Stop() {
			wg.Done() // its beat will not run
		}
		mu.Unlock()
		wg.Wait()
	}
}
