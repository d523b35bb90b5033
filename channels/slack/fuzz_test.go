package slack

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/slack-go/slack/slackevents"
)

// FuzzNormalise feeds event payloads through the normaliser as Socket
// Mode and the Events API do. It must never panic; an event it delivers
// has a chat in the event's conversation, the event's ts (or an edit's
// id) as MessageID, valid UTF-8 text without the bot's mention, and is
// addressed in a DM.
func FuzzNormalise(f *testing.F) {
	seeds := []string{
		`{"type":"message","channel":"D1","user":"U1","text":"hi","ts":"1700000000.000100","channel_type":"im"}`,
		`{"type":"message","channel":"C1","user":"U1","text":"<@UBOT> <@U2|bob> <#C9|ops> <!here> <https://x|y> &amp;","ts":"1.2","thread_ts":"1.1","channel_type":"channel"}`,
		`{"type":"app_mention","channel":"C1","user":"U1","text":"<@UBOT>","ts":"1.3"}`,
		`{"type":"message","subtype":"message_changed","channel":"D1","channel_type":"im","ts":"2.0","message":{"user":"U1","text":"b","ts":"1.0","edited":{"user":"U1","ts":"2.0"}},"previous_message":{"text":"a"}}`,
		`{"type":"message","subtype":"message_deleted","channel":"D1","ts":"3.0","deleted_ts":"1.0"}`,
		`{"type":"message","channel":"C1","bot_id":"B1","text":"x","ts":"4.0"}`,
		`{"type":"message","channel":"D1","user":"U1","text":"<<@UBOT>|>","ts":"5","files":[{"id":"F1","name":"a.png","mimetype":"image/png","size":1}]}`,
	}
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, inner string) {
		e, err := slackevents.ParseEvent(json.RawMessage(callback(inner)), slackevents.OptionNoVerifyToken())
		if err != nil {
			return
		}
		var p post
		switch ev := e.InnerEvent.Data.(type) {
		case *slackevents.MessageEvent:
			p = postOfMessage(e.TeamID, ev)
		case *slackevents.AppMentionEvent:
			p = postOfMention(e.TeamID, ev)
		default:
			return
		}
		if ignorePost(p, testMe) != "" {
			return
		}
		in := inbound(p, testMe)
		channel, _ := splitChat(in.ChatID)
		switch {
		case channel != p.Channel && !strings.Contains(p.Channel, threadSep):
			t.Errorf("chat %q is not in conversation %q", in.ChatID, p.Channel)
		case in.MessageID != p.TS && in.MessageID != editMessageID(p.TS, p.EditTS):
			t.Errorf("MessageID %q for ts %q", in.MessageID, p.TS)
		case in.ChatType == "dm" && !in.Mentioned:
			t.Error("a DM is not addressed")
		case utf8.ValidString(p.Text) && !utf8.ValidString(in.Text):
			t.Errorf("text %q is not UTF-8", in.Text)
		case !strings.Contains(p.Text, "&") && strings.Contains(in.Text, "<@"+testMe.UserID+">"): // &lt;@UBOT&gt; is text as typed
			t.Errorf("the bot's mention is left in %q", in.Text)
		}
	})
}
