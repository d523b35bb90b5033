package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/switchboard-gateway/switchboard/bench/internal/convo"
	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/llm"
)

// The fake model's behaviour: a conversation turn "(turn N) …" gets a long
// answer of its own, compaction's summary request gets a summary of the
// largest size the prompt allows, anything else is echoed.

// summaryPrefix starts the system prompt of agent/compact.go's summary call.
const summaryPrefix = "You compress chat transcripts."

// answer returns the fake model's reply function, each reply after delay.
func answer(delay time.Duration) *testkit.Reply {
	return &testkit.Reply{Func: func(r testkit.Recorded) testkit.Reply {
		reply := testkit.Reply{Delay: delay}
		last := lastMessage(r.Messages)
		switch n, ok := turnNumber(last.Content); {
		case isSummary(r):
			reply.Text = summaryText
		case ok:
			reply.Text = assistantText(n)
		default:
			reply.Text = "You said: " + last.Content
		}
		return reply
	}}
}

func lastMessage(msgs []llm.Message) llm.Message {
	if len(msgs) == 0 {
		return llm.Message{}
	}
	return msgs[len(msgs)-1]
}

// isSummary reports whether r is compaction's summary request.
func isSummary(r testkit.Recorded) bool {
	return len(r.Messages) > 0 && r.Messages[0].Role == llm.RoleSystem && strings.HasPrefix(r.Messages[0].Content, summaryPrefix)
}

// userText is the user's message of turn n: about 40 words (~240 bytes).
func userText(n int) string {
	return fmt.Sprintf("(turn %d) %s?", n, convo.Words(uint64(n), 40))
}

// assistantText is the model's answer in turn n: about 130 words (~800 bytes).
func assistantText(n int) string {
	return fmt.Sprintf("Answer %d: %s.", n, convo.Words(uint64(n)<<32, 130))
}

// summaryText is a 300-word summary: the most the summary prompt allows, so
// the compacted prompt is not made small by a terse fake.
var summaryText = "Summary: " + convo.Words(1<<62, 300) + "."

// turnNumber reads n from userText(n).
func turnNumber(s string) (int, bool) {
	var n int
	if _, err := fmt.Sscanf(s, "(turn %d)", &n); err != nil || n <= 0 {
		return 0, false
	}
	return n, true
}
