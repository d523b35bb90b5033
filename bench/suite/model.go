package main

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

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
	return fmt.Sprintf("(turn %d) %s?", n, words(uint64(n), 40))
}

// assistantText is the model's answer in turn n: about 130 words (~800 bytes).
func assistantText(n int) string {
	return fmt.Sprintf("Answer %d: %s.", n, words(uint64(n)<<32, 130))
}

// summaryText is a 300-word summary: the most the summary prompt allows, so
// the compacted prompt is not made small by a terse fake.
var summaryText = "Summary: " + words(1<<62, 300) + "."

// turnNumber reads n from userText(n).
func turnNumber(s string) (int, bool) {
	var n int
	if _, err := fmt.Sscanf(s, "(turn %d)", &n); err != nil || n <= 0 {
		return 0, false
	}
	return n, true
}

// vocabulary for filler text: ordinary English words of mixed length.
var vocabulary = strings.Fields(`the a of to and in that is for it with as on was be at by this
have from or one had not but what all were when we there can an your which their said if do will
each about how up out them then she many some so these would other into has more her two like him
see time could no make than first been its who now people my made over did down only way find use
may water long little very after words called just where most know get through back much go good
new write our me man too any day same right look think also around another came come work three
word must because does part even place well such here take why things help put years different
away again off went old number great tell men say small every found still between name should home
big give air line set own under read last never us left end along while might next sound below saw
something thought both few those always looked show large often together asked house world going
want school important until form food keep children feet land side without boy once animals life
enough took sometimes four head above kind began almost live page got earth need far hand high year
mother light parts country father let night following picture being study second eyes soon times
story boys since white days ever paper hard near sentence better best across during today others
however sure means knew try told young miles sun ways thing whole hear example heard several change
answer room sea against top turned learn point city play toward five using himself usually`)

// words returns n pseudo-random words, the same for the same seed.
func words(seed uint64, n int) string {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	out := make([]string, n)
	for i := range out {
		out[i] = vocabulary[rng.IntN(len(vocabulary))]
	}
	return strings.Join(out, " ")
}
