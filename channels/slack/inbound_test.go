package slack

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"

	"github.com/switchboard-gateway/switchboard/channels"
)

var testMe = self{UserID: "UBOT", BotID: "BBOT", TeamID: "T0FAKE"}

// callback wraps an inner event as Slack's event_callback does.
func callback(inner string) string {
	return `{"token":"x","team_id":"T0FAKE","api_app_id":"A1","type":"event_callback","event_id":"Ev1","event_time":1700000000,"event":` + inner + `}`
}

// parsePost parses an events_api payload as slack-go does and reads its post.
func parsePost(t *testing.T, payload string) (post, bool) {
	t.Helper()
	e, err := slackevents.ParseEvent(json.RawMessage(payload), slackevents.OptionNoVerifyToken())
	if err != nil {
		t.Fatalf("parse %s: %v", payload, err)
	}
	switch ev := e.InnerEvent.Data.(type) {
	case *slackevents.MessageEvent:
		return postOfMessage(e.TeamID, ev), true
	case *slackevents.AppMentionEvent:
		return postOfMention(e.TeamID, ev), true
	}
	return post{}, false
}

func TestNormaliseMessages(t *testing.T) {
	tests := []struct {
		name    string
		inner   string
		ignore  bool
		want    channels.Inbound
		wantWhy string
	}{
		{
			name:  "a DM",
			inner: `{"type":"message","channel":"D024BE91L","user":"U2147483697","text":"Hello &lt;world&gt; &amp; you","ts":"1700000000.000100","channel_type":"im","event_ts":"1700000000.000100"}`,
			want: channels.Inbound{Channel: "slack", ChatID: "D024BE91L", ChatType: channels.DM, Space: "T0FAKE", MessageID: "1700000000.000100",
				UserID: "U2147483697", Text: "Hello <world> & you", Mentioned: true, Time: time.Unix(1700000000, 100000).UTC()},
		},
		{
			name:  "a thread reply in a DM is that thread's chat",
			inner: `{"type":"message","channel":"D024BE91L","user":"U1","text":"more","ts":"1700000005.000200","thread_ts":"1700000000.000100","channel_type":"im"}`,
			want: channels.Inbound{Channel: "slack", ChatID: "D024BE91L:1700000000.000100", ChatType: channels.DM, Space: "T0FAKE", MessageID: "1700000005.000200",
				UserID: "U1", Text: "more", Mentioned: true, Time: time.Unix(1700000005, 200000).UTC()},
		},
		{
			name:  "a channel message naming the bot starts a thread, mention stripped",
			inner: `{"type":"message","channel":"C0LAN2Q65","user":"U1","text":"<@UBOT> what is <@U2|bob> doing in <#C9|ops>? see <https://x.example/a|this>","ts":"1700000010.000001","channel_type":"channel"}`,
			want: channels.Inbound{Channel: "slack", ChatID: "C0LAN2Q65:1700000010.000001", ChatType: channels.Group, Space: "T0FAKE", MessageID: "1700000010.000001",
				UserID: "U1", Text: "what is @bob doing in #ops? see this (https://x.example/a)", Mentioned: true, Time: time.Unix(1700000010, 1000).UTC()},
		},
		{
			name:  "a channel message without the bot is not addressed",
			inner: `{"type":"message","channel":"C0LAN2Q65","user":"U1","text":"lunch? <!here>","ts":"1700000011.000001","channel_type":"channel"}`,
			want: channels.Inbound{Channel: "slack", ChatID: "C0LAN2Q65:1700000011.000001", ChatType: channels.Group, Space: "T0FAKE", MessageID: "1700000011.000001",
				UserID: "U1", Text: "lunch? @here", Time: time.Unix(1700000011, 1000).UTC()},
		},
		{
			name:  "app_mention in a thread",
			inner: `{"type":"app_mention","channel":"C0LAN2Q65","user":"U1","text":"<@UBOT> and now?","ts":"1700000020.000001","thread_ts":"1700000010.000001","event_ts":"1700000020.000001"}`,
			want: channels.Inbound{Channel: "slack", ChatID: "C0LAN2Q65:1700000010.000001", ChatType: channels.Group, Space: "T0FAKE", MessageID: "1700000020.000001",
				UserID: "U1", Text: "and now?", Mentioned: true, Time: time.Unix(1700000020, 1000).UTC()},
		},
		{
			name:  "a reply in a thread the bot started is addressed",
			inner: `{"type":"message","channel":"C1","user":"U1","text":"yes","ts":"1700000030.000001","thread_ts":"1700000025.000001","parent_user_id":"UBOT","channel_type":"channel"}`,
			want: channels.Inbound{Channel: "slack", ChatID: "C1:1700000025.000001", ChatType: channels.Group, Space: "T0FAKE", MessageID: "1700000030.000001",
				UserID: "U1", Text: "yes", Mentioned: true, Quote: &channels.Quote{MessageID: "1700000025.000001", FromBot: true}, Time: time.Unix(1700000030, 1000).UTC()},
		},
		{
			name:  "an edit is a new message",
			inner: `{"type":"message","subtype":"message_changed","hidden":true,"channel":"D1","channel_type":"im","ts":"1700000040.000002","event_ts":"1700000040.000002","message":{"type":"message","user":"U1","text":"fixed typo","ts":"1700000035.000001","edited":{"user":"U1","ts":"1700000040.000000"}},"previous_message":{"type":"message","user":"U1","text":"fxed typo","ts":"1700000035.000001"}}`,
			want: channels.Inbound{Channel: "slack", ChatID: "D1", ChatType: channels.DM, Space: "T0FAKE", MessageID: "1700000035.000001:edit:1700000040.000000",
				UserID: "U1", Text: "(edited) fixed typo", Mentioned: true, Time: time.Unix(1700000040, 0).UTC()},
		},
		{
			name:    "an unfurl changes no text",
			inner:   `{"type":"message","subtype":"message_changed","channel":"D1","channel_type":"im","ts":"1700000041.000002","message":{"type":"message","user":"U1","text":"see https://x.example","ts":"1700000035.000001","edited":{"user":"U1","ts":"1700000041.000000"}},"previous_message":{"type":"message","user":"U1","text":"see https://x.example","ts":"1700000035.000001"}}`,
			ignore:  true,
			wantWhy: "edit without a text change",
		},
		{
			name:    "a deletion",
			inner:   `{"type":"message","subtype":"message_deleted","hidden":true,"channel":"D1","channel_type":"im","ts":"1700000050.000002","deleted_ts":"1700000035.000001","previous_message":{"type":"message","user":"U1","text":"x","ts":"1700000035.000001"}}`,
			ignore:  true,
			wantWhy: "deletion",
		},
		{
			name:    "the bot's own message",
			inner:   `{"type":"message","channel":"D1","user":"UBOT","bot_id":"BBOT","text":"my answer","ts":"1700000060.000001","channel_type":"im"}`,
			ignore:  true,
			wantWhy: "own message",
		},
		{
			name:    "another bot",
			inner:   `{"type":"message","subtype":"bot_message","channel":"C1","bot_id":"B999","username":"ci","text":"build green","ts":"1700000061.000001","channel_type":"channel"}`,
			ignore:  true,
			wantWhy: "from a bot",
		},
		{
			name:    "another app's bot user",
			inner:   `{"type":"message","channel":"C1","user":"U777","bot_id":"B777","text":"<@UBOT> hi","ts":"1700000062.000001","channel_type":"channel"}`,
			ignore:  true,
			wantWhy: "from a bot",
		},
		{
			name:    "a join",
			inner:   `{"type":"message","subtype":"channel_join","channel":"C1","user":"U1","text":"<@U1> has joined the channel","ts":"1700000063.000001","channel_type":"channel"}`,
			ignore:  true,
			wantWhy: "system message channel_join",
		},
		{
			name:  "a file share in a DM",
			inner: `{"type":"message","subtype":"file_share","channel":"D1","user":"U1","text":"look","ts":"1700000070.000001","channel_type":"im","files":[{"id":"F1","name":"a.png","mimetype":"image/png","size":3,"url_private":"https://files.slack.com/files-pri/T0FAKE-F1/a.png"}]}`,
			want: channels.Inbound{Channel: "slack", ChatID: "D1", ChatType: channels.DM, Space: "T0FAKE", MessageID: "1700000070.000001",
				UserID: "U1", Text: "look", Mentioned: true, Time: time.Unix(1700000070, 1000).UTC()},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, ok := parsePost(t, callback(tt.inner))
			if !ok {
				t.Fatal("not a message event")
			}
			why := ignorePost(p, testMe)
			if tt.ignore {
				if why != tt.wantWhy {
					t.Fatalf("ignore = %q, want %q", why, tt.wantWhy)
				}
				return
			}
			if why != "" {
				t.Fatalf("ignored: %s", why)
			}
			got := inbound(p, testMe)
			gotJSON, _ := json.Marshal(got)
			wantJSON, _ := json.Marshal(tt.want)
			if string(gotJSON) != string(wantJSON) {
				t.Errorf("got  %s\nwant %s", gotJSON, wantJSON)
			}
		})
	}
}

func TestChatKeyRoundTrip(t *testing.T) {
	for _, id := range []string{"D1", "C0LAN2Q65:1700000010.000001", "G123:1.2"} {
		c, th := splitChat(id)
		if got := chatKey(c, th); got != id {
			t.Errorf("chatKey(splitChat(%q)) = %q", id, got)
		}
	}
	if c, th := target("C1", "1700000010.000001:edit:1700000011.000000"); c != "C1" || th != "1700000010.000001" {
		t.Errorf("target of a reply in a channel = %q %q", c, th)
	}
	if c, th := target("D1", "1700000010.000001"); c != "D1" || th != "" {
		t.Errorf("target of a reply in a DM = %q %q, want the main timeline", c, th)
	}
}

func TestNormalisePress(t *testing.T) {
	payload := `{"type":"block_actions","user":{"id":"U1","username":"ann","name":"ann","team_id":"T0FAKE"},"api_app_id":"A1","token":"x",
"container":{"type":"message","message_ts":"1700000100.000001","channel_id":"C1","is_ephemeral":false,"thread_ts":"1700000010.000001"},
"trigger_id":"123.456.abc","team":{"id":"T0FAKE","domain":"fake"},"channel":{"id":"C1","name":"general"},
"message":{"type":"message","user":"UBOT","text":"Run rm?","ts":"1700000100.000001","thread_ts":"1700000010.000001"},
"actions":[{"action_id":"sb_0","block_id":"sb_actions","text":{"type":"plain_text","text":"Approve"},"value":"approve:12","type":"button","action_ts":"1700000105.123456"}]}`
	var cb slack.InteractionCallback
	if err := json.Unmarshal([]byte(payload), &cb); err != nil {
		t.Fatal(err)
	}
	in, ok := pressInbound(cb)
	if !ok {
		t.Fatal("press not read")
	}
	if in.ChatID != "C1:1700000010.000001" || in.Action != "approve:12" || in.UserID != "U1" || in.MessageID != "act:1700000105.123456" ||
		!in.Mentioned || in.ChatType != channels.Group || in.Quote == nil || in.Quote.MessageID != "1700000100.000001" {
		t.Errorf("press = %+v", in)
	}
	cb.ActionCallback.BlockActions[0].Value = ""
	if _, ok := pressInbound(cb); ok {
		t.Error("a press without a value was read")
	}
}

func TestNormaliseCommand(t *testing.T) {
	in, ok := commandInbound(slack.SlashCommand{Command: "/status", Text: "", UserID: "U1", UserName: "ann", ChannelID: "D1", TeamID: "T0FAKE", TriggerID: "t1"})
	if !ok || in.Text != "/status" || in.ChatID != "D1" || in.ChatType != channels.DM || in.MessageID != "cmd:t1" {
		t.Errorf("command = %+v, %v", in, ok)
	}
	if _, ok := commandInbound(slack.SlashCommand{Command: "/new", ChannelID: "C1"}); ok {
		t.Error("a command without a user was read")
	}
}

func TestTSTime(t *testing.T) {
	for ts, want := range map[string]time.Time{
		"1700000000.000100": time.Unix(1700000000, 100000).UTC(),
		"1700000000":        time.Unix(1700000000, 0).UTC(),
		"junk":              {},
	} {
		if got := tsTime(ts); !got.Equal(want) {
			t.Errorf("tsTime(%q) = %v, want %v", ts, got, want)
		}
	}
}

func TestEmojiName(t *testing.T) {
	for in, want := range map[string]string{"👍": "thumbsup", ":tada:": "tada", "white_check_mark": "white_check_mark", "+1": "+1"} {
		if got, ok := emojiName(in); !ok || got != want {
			t.Errorf("emojiName(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
	for _, bad := range []string{"", "🦄", "a b", "<script>"} {
		if got, ok := emojiName(bad); ok {
			t.Errorf("emojiName(%q) = %q, want refused", bad, got)
		}
	}
}
