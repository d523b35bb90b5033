package router

import (
	"context"
	"fmt"
	"time"

	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/internal/slots"
	"github.com/switchboard-gateway/switchboard/llm"
)

// When everyone writes at once: a message whose turn cannot start
// (MaxConcurrentTurns are running) waits in line for a turn slot, first
// come first served; a turn whose model request cannot go out (the
// model client's llm.max_concurrent_requests) waits in the client's line.
// A user who has waited QueueNoticeAfter in either line and still waits is
// told once, per message, how many are ahead: a burst that clears within
// a moment sends nothing, and the notice never comes after the answer
// it announces. The notice is a preview (channels.PriorityPreview): an
// adapter's outbound pacing may drop it under pressure, and it is not
// tried again. Channels whose replies go to a waiting requester (the chat
// API, the terminal: channels.InProcessReplier) get none: it would be taken for
// the answer.

// QueueNoticeAfter is how long a message waits in line before its user is
// told their place: longer than a burst that clears at once, shorter than
// anyone starts to wonder.
const QueueNoticeAfter = 2 * time.Second

// inLine is how a message waits for a turn slot.
func (r *Router) inLine(ctx context.Context, it item) slots.Wait {
	if !it.plain() {
		return slots.Wait{} // a job, or an interceptor's work: nobody to tell
	}
	return slots.Wait{After: QueueNoticeAfter, Notify: func(ahead int) { r.tellBusy(ctx, it, ahead) }}
}

// modelLine makes the turn's model requests tell the user when they wait
// in the model client's line.
func (r *Router) modelLine(ctx context.Context, it item) context.Context {
	return llm.WithWaitNotice(ctx, QueueNoticeAfter, func(ahead int) { r.tellBusy(ctx, it, ahead) })
}

// tellBusy tells the user of it, once, that they wait in line.
func (r *Router) tellBusy(ctx context.Context, it item, ahead int) {
	if it.busy == nil || r.inProcess(it.in.Channel) || it.busy.Swap(true) {
		return
	}
	if _, err := r.Send(channels.WithPriority(ctx, channels.PriorityPreview), it.in, busyText(ahead)); err != nil {
		r.log.Debug("could not tell the user they wait in line", "channel", it.in.Channel, "chat", it.in.ChatID, "err", err)
	}
}

// busyText says how many are ahead of the user.
func busyText(ahead int) string {
	switch ahead {
	case 0:
		return "Lots of people are writing to me right now: you're next, I'll answer in a moment."
	case 1:
		return "Lots of people are writing to me right now: 1 person is ahead of you. I'll answer as soon as I can."
	default:
		return fmt.Sprintf("Lots of people are writing to me right now: %d people are ahead of you. I'll answer as soon as I can.", ahead)
	}
}
