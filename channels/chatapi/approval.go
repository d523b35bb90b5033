package chatapi

// Approvals on the chat API. A turn that pauses for approval answers its
// request with the question: in words as the content, and as data in the
// response's "switchboard_approval" field (streamed: in the final chunk).
// Once that response was written, the user's next request saying "yes" or
// "no" answers it (the router sees Action "approve:ID" or "deny:ID") and
// gets the resumed turn's reply; a "yes" from a client that never got the
// question is an ordinary message, which supersedes the paused calls.

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/llm"
)

// ApprovalField is the response field (streamed: of the final chunk) that
// holds the approval question a turn paused on.
const ApprovalField = "switchboard_approval"

// questionWait bounds how long a paused request waits for its question
// (the approval is stored first); past it, the request is told the
// question could not be asked.
const questionWait = 10 * time.Second

const noQuestionMsg = "The turn paused for an approval, but the question could not be recorded, so nothing was run. Try again."

// askedQuestion is an approval question delivered to a user's client.
type askedQuestion struct {
	id     int64
	origin string // the request whose turn paused: the resumed turn's events name it
}

// resumeKey lists the request waiting for a chat's resumed turn, whose
// replies name no message.
func resumeKey(chat string) string { return "resume:" + chat }

// waiterKey is the waiters key of the request a reply to in answers.
func waiterKey(in channels.Inbound) string {
	if in.MessageID == "" {
		return resumeKey(in.ChatID)
	}
	return in.MessageID
}

// AskApproval implements channels.ApprovalAsker: the question answers the
// request whose turn paused (ctx is marked with it). When that request is
// gone, the question is not delivered, and no "yes" answers it.
func (a *API) AskApproval(ctx context.Context, m channels.Outbound, q channels.ApprovalQuestion) (string, error) {
	id := fmt.Sprintf("http-%d", a.seq.Add(1))
	var w *waiter
	a.mu.Lock()
	if in, ok := channels.InboundOf(ctx); ok && in.Channel == ChannelName {
		w = a.waiters[waiterKey(in)]
	}
	a.mu.Unlock()
	if w == nil || !w.ask(q) {
		a.log.Info("approval question for a request that is no longer waiting: not delivered, so no yes can answer it",
			"chat", m.ChatID, "approval", q.ID)
	}
	return id, nil
}

// takeAsked returns and forgets the question delivered to user: any new
// request of theirs answers it or passes it by.
func (a *API) takeAsked(user string) (askedQuestion, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	q, ok := a.asked[user]
	delete(a.asked, user)
	return q, ok
}

// deliverQuestion writes the response carrying q (write reports success)
// to user's request origin, and remembers the question as delivered: it
// is marked first, so that a "yes" sent the moment the client reads it
// counts, and forgotten again if the write failed.
func (a *API) deliverQuestion(user, origin string, q *channels.ApprovalQuestion, write func() bool) {
	if q == nil {
		write()
		return
	}
	a.mu.Lock()
	a.asked[user] = askedQuestion{id: q.ID, origin: origin}
	a.mu.Unlock()
	if write() {
		return
	}
	a.mu.Lock()
	if a.asked[user].id == q.ID {
		delete(a.asked, user)
	}
	a.mu.Unlock()
	a.log.Info("approval question not delivered (the client went away); a yes will not answer it", "chat", user, "approval", q.ID)
}

// answerOf reads a request to a chat with a delivered question: a bare yes
// or no (no images) is the answer, as the Action approvals reads.
func answerOf(q askedQuestion, text string, atts []channels.Attachment) (string, bool) {
	approve, ok := channels.ApprovalAnswer(text)
	if !ok || len(atts) > 0 {
		return "", false
	}
	verb := "deny"
	if approve {
		verb = "approve"
	}
	return fmt.Sprintf("%s:%d", verb, q.id), true
}

// pause: the turn stopped for approval, and the question follows. If it
// does not come within questionWait, the request is told so.
func (w *waiter) pause(u llm.Usage) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done || w.noQuestion != nil {
		return
	}
	w.usage = u
	w.noQuestion = time.AfterFunc(questionWait, func() { w.end(noQuestionMsg, nil) })
}

// ask ends the request with the approval question; false if it had ended.
func (w *waiter) ask(q channels.ApprovalQuestion) bool { return w.end(q.Question, &q) }

// end adds a last message (the question, when q is set) and ends the
// request as paused for approval; false if it had ended.
func (w *waiter) end(text string, q *channels.ApprovalQuestion) bool {
	if _, ok := w.add(text, q); !ok {
		return false
	}
	w.mu.Lock()
	u := w.usage
	w.mu.Unlock()
	w.finish(u, agent.StopRequiresApproval, "")
	return true
}

// flushed reports whether what was written reached the connection.
func flushed(w http.ResponseWriter) bool {
	return http.NewResponseController(w).Flush() == nil
}
