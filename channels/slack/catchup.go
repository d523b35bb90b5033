package slack

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/switchboard-gateway/switchboard/channels"
)

// Catch-up. Slack sends an event again while it is not acknowledged, but
// only for a while (three retries over a few minutes), so messages written
// during a longer outage of the gateway would be lost. Each time the
// Socket Mode connection comes up, the adapter reads what was written
// after the newest message it took in per chat (Options.LastSeen): the
// rest of a DM's main timeline (conversations.history), the rest of each
// thread (conversations.replies), and new top-level messages in the
// channels it has threads in. They go through the same normalisation and
// the same Deliver; what was taken in already is the same message again.
// It needs the history scopes (im:history, channels:history,
// groups:history); without them it logs and does nothing.

const (
	// defaultCatchUpLimit caps the messages read per conversation.
	defaultCatchUpLimit = 200
	// defaultCatchUpMaxAge: older messages are not recovered.
	defaultCatchUpMaxAge = 24 * time.Hour
)

// catchUp delivers what was written after the newest message taken in,
// per chat. It logs what fails and goes on with the next chat.
func (a *Adapter) catchUp(ctx context.Context, sink channels.Sink) {
	if a.lastSeen == nil {
		return
	}
	last, err := a.lastSeen(ctx)
	if err != nil {
		a.log.Warn("slack: catch-up: read the newest messages taken in", "err", err)
		return
	}
	floor := a.now().Add(-a.catchUpAge)
	me := a.identity()
	newest := map[string]string{} // channel → the newest ts taken in there, for new threads
	delivered := 0
	for _, chat := range sortedKeys(last) {
		ts, ok := messageTS(last[chat])
		if !ok {
			continue
		}
		channel, thread := splitChat(chat)
		if tsTime(ts).Before(floor) {
			continue
		}
		if thread == "" && !strings.HasPrefix(channel, "D") {
			continue // a channel's main timeline is read below, for new threads
		}
		var msgs []slack.Message
		if thread == "" {
			msgs, err = a.history(ctx, channel, ts)
		} else {
			msgs, err = a.replies(ctx, channel, thread, ts)
		}
		if err != nil {
			if unsupported(err) {
				a.log.Warn("slack: no catch-up: the app cannot read history (add the scopes im:history, channels:history, groups:history)", "err", err)
				return
			}
			a.log.Warn("slack: catch-up: read a conversation", "chat", chat, "err", a.redact(err.Error()))
			continue
		}
		delivered += a.deliverAll(ctx, sink, me, channel, msgs)
		if !strings.HasPrefix(channel, "D") && compareTS(ts, newest[channel]) > 0 {
			newest[channel] = ts
		}
	}
	for _, channel := range sortedKeys(newest) {
		msgs, err := a.history(ctx, channel, newest[channel])
		if err != nil {
			a.log.Warn("slack: catch-up: read a channel", "chat", channel, "err", a.redact(err.Error()))
			continue
		}
		delivered += a.deliverAll(ctx, sink, me, channel, msgs)
	}
	if delivered > 0 {
		a.log.Info("slack: caught up on messages written while disconnected", "messages", delivered)
	}
}

// deliverAll delivers the messages of one conversation, oldest first, and
// returns how many went through.
func (a *Adapter) deliverAll(ctx context.Context, sink channels.Sink, me self, channel string, msgs []slack.Message) int {
	slices.SortFunc(msgs, func(x, y slack.Message) int { return compareTS(x.Timestamp, y.Timestamp) })
	n := 0
	for _, m := range msgs {
		p := postOfHistory(me.TeamID, channel, m)
		if ignorePost(p, me) != "" {
			continue
		}
		in := inbound(p, me)
		if in.ChatType == channels.Group && !in.Mentioned {
			continue
		}
		in.Attachments, _ = attachments(ctx, p.Files, a.maxDownload, a.download)
		in.UserName, in.DisplayName = a.userNames(ctx, in.UserID)
		if err := a.deliver(ctx, sink, in); err != nil {
			a.log.Warn("slack: catch-up: message not delivered", "message", in.MessageID, "chat", in.ChatID, "err", err)
			continue
		}
		n++
	}
	return n
}

// postOfHistory reads a message of conversations.history or .replies.
func postOfHistory(team, channel string, m slack.Message) post {
	p := post{Team: team, Channel: channel, User: m.User, BotID: m.BotID, SubType: m.SubType, Text: m.Text,
		TS: m.Timestamp, ThreadTS: m.ThreadTimestamp, ParentUser: m.ParentUserId, Files: m.Files}
	if strings.HasPrefix(channel, "D") {
		p.ChannelType = "im"
	}
	if p.ThreadTS == p.TS {
		p.ThreadTS = "" // a thread's parent is a top-level message
	}
	return p
}

// history is the top-level messages of a conversation after ts.
func (a *Adapter) history(ctx context.Context, channel, ts string) ([]slack.Message, error) {
	var out []slack.Message
	err := a.retry(ctx, "conversations.history", func() error {
		res, err := a.api.GetConversationHistoryContext(ctx, &slack.GetConversationHistoryParameters{
			ChannelID: channel, Oldest: ts, Limit: a.catchUpMax})
		if err == nil {
			out = res.Messages
		}
		return err
	})
	return after(out, ts), err
}

// replies is the messages of a thread after ts.
func (a *Adapter) replies(ctx context.Context, channel, thread, ts string) ([]slack.Message, error) {
	var out []slack.Message
	err := a.retry(ctx, "conversations.replies", func() error {
		msgs, _, _, err := a.api.GetConversationRepliesContext(ctx, &slack.GetConversationRepliesParameters{
			ChannelID: channel, Timestamp: thread, Oldest: ts, Limit: a.catchUpMax})
		out = msgs
		return err
	})
	return after(out, ts), err
}

// after keeps the messages newer than ts (Slack's oldest is inclusive
// for replies' parent).
func after(msgs []slack.Message, ts string) []slack.Message {
	return slices.DeleteFunc(msgs, func(m slack.Message) bool { return compareTS(m.Timestamp, ts) <= 0 })
}

// unsupported reports whether err says the app may not call the method
// at all, so that trying other conversations is pointless.
func unsupported(err error) bool {
	var se slack.SlackErrorResponse
	if !errors.As(err, &se) {
		return false
	}
	switch se.Err {
	case "missing_scope", "unknown_method", "not_allowed_token_type", "invalid_auth", "not_authed":
		return true
	}
	return false
}

// messageTS is the ts of a stored MessageID: a message's ts, or an edit's
// original ts; presses and commands have none.
func messageTS(id string) (string, bool) {
	ts, _, _ := strings.Cut(id, ":")
	if _, err := strconv.ParseFloat(ts, 64); err != nil || strings.ContainsAny(ts, "eE+-") {
		return "", false
	}
	return ts, true
}

// compareTS orders two Slack timestamps.
func compareTS(x, y string) int {
	xs, xf, _ := strings.Cut(x, ".")
	ys, yf, _ := strings.Cut(y, ".")
	if len(xs) != len(ys) {
		return len(xs) - len(ys)
	}
	if c := strings.Compare(xs, ys); c != 0 {
		return c
	}
	return strings.Compare(xf+strings.Repeat("0", max(0, 6-len(xf))), yf+strings.Repeat("0", max(0, 6-len(yf))))
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
