package discord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/bwmarrin/discordgo"

	"github.com/switchboard-gateway/switchboard/channels"
)

const botID = "900"

// msg decodes a MESSAGE_CREATE payload as Discord sends it.
func msg(t *testing.T, payload string) *discordgo.Message {
	t.Helper()
	var m discordgo.Message
	if err := json.Unmarshal([]byte(payload), &m); err != nil {
		t.Fatalf("decode %s: %v", payload, err)
	}
	return &m
}

func TestInbound(t *testing.T) {
	ts := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		payload string
		want    channels.Inbound
	}{
		{
			name: "DM is always addressed to the bot",
			payload: `{"id":"1","channel_id":"dm","author":{"id":"u1","username":"alice","global_name":"Alice A"},
				"content":"hi","timestamp":"2026-03-01T12:00:00Z","type":0,"mentions":[],"attachments":[]}`,
			want: channels.Inbound{Channel: "discord", ChatID: "dm", ChatType: channels.DM, MessageID: "1",
				UserID: "u1", UserName: "alice", DisplayName: "Alice A", Text: "hi", Mentioned: true, Time: ts},
		},
		{
			name: "guild message, nickname, not mentioned",
			payload: `{"id":"2","channel_id":"c","guild_id":"g","author":{"id":"u1","username":"alice"},"member":{"nick":"Al"},
				"content":"just talking","timestamp":"2026-03-01T12:00:00Z","type":0}`,
			want: channels.Inbound{Channel: "discord", ChatID: "c", ChatType: channels.Group, Space: "g", MessageID: "2",
				UserID: "u1", UserName: "alice", DisplayName: "Al", Text: "just talking", Time: ts},
		},
		{
			name: "bot mention stripped, others resolved",
			payload: `{"id":"3","channel_id":"c","guild_id":"g","author":{"id":"u1","username":"alice"},
				"content":"<@!900> ask <@u2>, not <@900>, ok?","timestamp":"2026-03-01T12:00:00Z","type":0,
				"mentions":[{"id":"900","username":"switchboard","bot":true},{"id":"u2","username":"bob"}]}`,
			want: channels.Inbound{Channel: "discord", ChatID: "c", ChatType: channels.Group, Space: "g", MessageID: "3",
				UserID: "u1", UserName: "alice", DisplayName: "alice", Text: "ask @bob, not, ok?", Mentioned: true, Time: ts},
		},
		{
			name: "reply to the bot",
			payload: `{"id":"4","channel_id":"c","guild_id":"g","author":{"id":"u1","username":"alice"},
				"content":"and then?","timestamp":"2026-03-01T12:00:00Z","type":19,
				"message_reference":{"message_id":"3","channel_id":"c","guild_id":"g"},
				"referenced_message":{"id":"3","channel_id":"c","author":{"id":"900","username":"switchboard","bot":true},"content":"once upon a time","type":0}}`,
			want: channels.Inbound{Channel: "discord", ChatID: "c", ChatType: channels.Group, Space: "g", MessageID: "4",
				UserID: "u1", UserName: "alice", DisplayName: "alice", Text: "and then?", Mentioned: true, Time: ts,
				Quote: &channels.Quote{MessageID: "3", Author: "switchboard", Text: "once upon a time", FromBot: true}},
		},
		{
			name: "reply to someone else is quoted but not a mention",
			payload: `{"id":"5","channel_id":"c","guild_id":"g","author":{"id":"u1","username":"alice"},
				"content":"agreed","timestamp":"2026-03-01T12:00:00Z","type":19,
				"message_reference":{"message_id":"2"},
				"referenced_message":{"id":"2","channel_id":"c","author":{"id":"u2","username":"bob"},"content":"cats > dogs <@u3>","type":0,
					"mentions":[{"id":"u3","username":"carol"}]}}`,
			want: channels.Inbound{Channel: "discord", ChatID: "c", ChatType: channels.Group, Space: "g", MessageID: "5",
				UserID: "u1", UserName: "alice", DisplayName: "alice", Text: "agreed", Time: ts,
				Quote: &channels.Quote{MessageID: "2", Author: "bob", Text: "cats > dogs @carol"}},
		},
		{
			name: "reply to a deleted message keeps only its id",
			payload: `{"id":"6","channel_id":"c","guild_id":"g","author":{"id":"u1","username":"alice"},
				"content":"what?","timestamp":"2026-03-01T12:00:00Z","type":19,"message_reference":{"message_id":"77"},"referenced_message":null}`,
			want: channels.Inbound{Channel: "discord", ChatID: "c", ChatType: channels.Group, Space: "g", MessageID: "6",
				UserID: "u1", UserName: "alice", DisplayName: "alice", Text: "what?", Time: ts,
				Quote: &channels.Quote{MessageID: "77"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := msg(t, tt.payload)
			if why := ignoreMessage(m, botID); why != "" {
				t.Fatalf("ignored: %s", why)
			}
			got := inbound(m, botID)
			if !got.Time.Equal(tt.want.Time) {
				t.Errorf("time = %v, want %v", got.Time, tt.want.Time)
			}
			got.Time, tt.want.Time = time.Time{}, time.Time{}
			gq, wq := got.Quote, tt.want.Quote
			got.Quote, tt.want.Quote = nil, nil
			if !equalInbound(got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
			if (gq == nil) != (wq == nil) || (gq != nil && *gq != *wq) {
				t.Errorf("quote = %+v, want %+v", gq, wq)
			}
		})
	}
}

func equalInbound(a, b channels.Inbound) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

func TestIgnoreMessage(t *testing.T) {
	tests := []struct{ payload, want string }{
		{`{"id":"1","author":{"id":"900","username":"me","bot":true},"content":"echo","type":0}`, "own message"},
		{`{"id":"1","author":{"id":"7","username":"other","bot":true},"content":"beep","type":0}`, "from a bot"},
		{`{"id":"1","webhook_id":"55","author":{"id":"55","username":"hook"},"content":"hook","type":0}`, "from a bot"},
		{`{"id":"1","author":{"id":"u1","username":"alice"},"content":"","type":7}`, "system message"},   // member join
		{`{"id":"1","author":{"id":"u1","username":"alice"},"content":"t","type":18}`, "system message"}, // thread created
		{`{"id":"1","content":"no author","type":0}`, "no author"},
		{`{"id":"1","author":{"id":"u1","username":"alice"},"content":"hi","type":0}`, ""},
		{`{"id":"1","author":{"id":"u1","username":"alice"},"content":"hi","type":19}`, ""},
	}
	for _, tt := range tests {
		if got := ignoreMessage(msg(t, tt.payload), botID); got != tt.want {
			t.Errorf("ignoreMessage(%s) = %q, want %q", tt.payload, got, tt.want)
		}
	}
}

func TestPlanAttachment(t *testing.T) {
	tests := []struct {
		name, file, ct string
		size           int
		kind           channels.AttachmentKind
		mime           string
		plan           attachmentPlan
	}{
		{"small image", "a.png", "image/png", 100, channels.Image, "image/png", downloadData},
		{"big image", "a.jpg", "image/jpeg", 2000, channels.Image, "image/jpeg", tooLargeImage},
		{"text with charset", "a.txt", "text/plain; charset=utf-8", 10, channels.File, "text/plain", downloadText},
		{"markdown without type", "README.md", "", 10, channels.File, "text/markdown", downloadText},
		{"json", "data.json", "application/json", 10, channels.File, "application/json", downloadText},
		{"source by extension", "main.go", "application/octet-stream", 10, channels.File, "application/octet-stream", downloadText},
		{"text over 64 KiB", "big.log", "text/plain", 70 << 10, channels.File, "text/plain", describeOnly},
		{"voice note", "voice.ogg", "audio/ogg", 10, channels.Audio, "audio/ogg", describeOnly},
		{"video", "clip.mp4", "video/mp4", 10, channels.Video, "video/mp4", describeOnly},
		{"archive", "x.zip", "application/zip", 10, channels.File, "application/zip", describeOnly},
		{"unknown", "blob", "", 10, channels.File, "application/octet-stream", describeOnly},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kind, media, plan := planAttachment(&discordgo.MessageAttachment{Filename: tt.file, ContentType: tt.ct, Size: tt.size}, 1024)
			if kind != tt.kind || media != tt.mime || plan != tt.plan {
				t.Errorf("got %s %s %d, want %s %s %d", kind, media, plan, tt.kind, tt.mime, tt.plan)
			}
		})
	}
}

func TestAttachmentsDownloadFailures(t *testing.T) {
	m := msg(t, `{"id":"1","author":{"id":"u1","username":"alice"},"type":0,"attachments":[
		{"id":"a","filename":"a.png","content_type":"image/png","size":10,"url":"https://cdn.discordapp.com/a.png"},
		{"id":"b","filename":"b.txt","content_type":"text/plain","size":4,"url":"https://cdn.discordapp.com/b.txt"}],
		"sticker_items":[{"id":"s","name":"wave","format_type":1}]}`)
	get := func(_ context.Context, url string, _ int64) ([]byte, error) {
		if strings.HasSuffix(url, ".txt") {
			return []byte{0xff, 0xfe, 0x00}, nil
		}
		return nil, errors.New("HTTP 404 Not Found")
	}
	got, left := attachments(t.Context(), m, 1024, DefaultMaxAttachments, get)
	if len(got) != 3 || left != 0 {
		t.Fatalf("got %+v", got)
	}
	if got[0].Data != nil || !strings.Contains(got[0].Note, "404") {
		t.Errorf("failed image = %+v", got[0])
	}
	if got[1].Text != "" || !strings.Contains(got[1].Note, "not UTF-8") {
		t.Errorf("binary text = %+v", got[1])
	}
	if got[2].Kind != channels.Sticker || got[2].Name != "wave" {
		t.Errorf("sticker = %+v", got[2])
	}
}

func TestInteractionInbound(t *testing.T) {
	decode := func(p string) *discordgo.Interaction {
		var i discordgo.Interaction
		if err := json.Unmarshal([]byte(p), &i); err != nil {
			t.Fatalf("decode: %v", err)
		}
		return &i
	}
	guild := decode(`{"id":"1400000000000000000","application_id":"900","type":2,"guild_id":"g","channel_id":"c","token":"tok",
		"data":{"id":"cmd","name":"status","type":1},"member":{"nick":"Al","user":{"id":"u1","username":"alice"}},"version":1}`)
	in, ok := interactionInbound(guild, botID)
	if !ok || in.Text != "/status" || in.ChatID != "c" || in.ChatType != channels.Group || in.UserID != "u1" ||
		in.DisplayName != "Al" || !in.Mentioned || in.MessageID != "1400000000000000000" || in.Time.IsZero() || in.Action != "" {
		t.Errorf("guild command = %+v, %v", in, ok)
	}
	dm := decode(`{"id":"1","application_id":"900","type":2,"channel_id":"d","token":"tok",
		"data":{"id":"cmd","name":"new","type":1},"user":{"id":"u1","username":"alice","global_name":"Alice"},"version":1}`)
	if in, ok := interactionInbound(dm, botID); !ok || in.ChatType != channels.DM || in.Text != "/new" || in.DisplayName != "Alice" {
		t.Errorf("dm command = %+v, %v", in, ok)
	}
}

func TestButtonPressInbound(t *testing.T) {
	pressTime := time.UnixMilli(1400000000000000000>>22 + 1420070400000).UTC()
	// The message the buttons are on, as Discord attaches it to the interaction.
	const botMessage = `"message":{"id":"m1","channel_id":"c","author":{"id":"900","username":"switchboard","bot":true},
		"content":"Run <@u2>'s job?","timestamp":"2026-03-01T12:00:00Z","type":0,"mentions":[{"id":"u2","username":"bob"}],
		"components":[{"type":1,"components":[{"type":2,"style":1,"label":"Approve","custom_id":"approve:12"},
			{"type":2,"style":4,"label":"Deny","custom_id":"deny:12"}]}]}`
	tests := []struct {
		name    string
		payload string
		want    channels.Inbound
		ok      bool
	}{
		{
			name: "guild: the member who pressed, quoting the message",
			payload: `{"id":"1400000000000000000","application_id":"900","type":3,"guild_id":"g","channel_id":"c","token":"tok","version":1,
				"data":{"custom_id":"approve:12","component_type":2},
				"member":{"nick":"Al","roles":[],"user":{"id":"u1","username":"alice","global_name":"Alice"}},` + botMessage + `}`,
			want: channels.Inbound{Channel: "discord", ChatID: "c", ChatType: channels.Group, Space: "g",
				MessageID: "ia:1400000000000000000", UserID: "u1", UserName: "alice", DisplayName: "Al",
				Mentioned: true, Time: pressTime, Action: "approve:12",
				Quote: &channels.Quote{MessageID: "m1", Author: "switchboard", Text: "Run @bob's job?", FromBot: true}},
			ok: true,
		},
		{
			name: "DM: the user who pressed",
			payload: `{"id":"1400000000000000000","application_id":"900","type":3,"channel_id":"d","token":"tok","version":1,
				"data":{"custom_id":"deny:12","component_type":2},"user":{"id":"u1","username":"alice"},` + botMessage + `}`,
			want: channels.Inbound{Channel: "discord", ChatID: "d", ChatType: channels.DM,
				MessageID: "ia:1400000000000000000", UserID: "u1", UserName: "alice", DisplayName: "alice",
				Mentioned: true, Time: pressTime, Action: "deny:12",
				Quote: &channels.Quote{MessageID: "m1", Author: "switchboard", Text: "Run @bob's job?", FromBot: true}},
			ok: true,
		},
		{
			name: "select menu: not a button the adapter offers",
			payload: `{"id":"1","application_id":"900","type":3,"channel_id":"d","token":"tok","version":1,
				"data":{"custom_id":"pick","component_type":3,"values":["a"]},"user":{"id":"u1","username":"alice"}}`,
		},
		{
			name: "no user",
			payload: `{"id":"1","application_id":"900","type":3,"channel_id":"d","token":"tok","version":1,
				"data":{"custom_id":"approve:1","component_type":2}}`,
		},
		{
			name: "modal submit",
			payload: `{"id":"1","application_id":"900","type":5,"channel_id":"d","token":"tok","version":1,
				"data":{"custom_id":"form","components":[]},"user":{"id":"u1","username":"alice"}}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var i discordgo.Interaction
			if err := json.Unmarshal([]byte(tt.payload), &i); err != nil {
				t.Fatalf("decode: %v", err)
			}
			got, ok := interactionInbound(&i, botID)
			if got.Time.Equal(tt.want.Time) {
				got.Time = tt.want.Time // the same instant, perhaps in another *Location
			}
			if ok != tt.ok || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v, %v\nwant %+v, %v", got, ok, tt.want, tt.ok)
				if got.Quote != nil && tt.want.Quote != nil {
					t.Errorf("quote = %+v, want %+v", *got.Quote, *tt.want.Quote)
				}
			}
		})
	}
}

func TestAckResponse(t *testing.T) {
	failed := errors.New("store is down")
	tests := []struct {
		name     string
		in       channels.Inbound
		err      error
		wantType discordgo.InteractionResponseType
		wantNote string // ephemeral content, "" for none
	}{
		{"command delivered", channels.Inbound{Text: "/new"}, nil, discordgo.InteractionResponseChannelMessageWithSource, "✓ /new"},
		{"command not delivered", channels.Inbound{Text: "/new"}, failed, discordgo.InteractionResponseChannelMessageWithSource, "Sorry, /new did not go through. Please try again."},
		{"press delivered", channels.Inbound{Action: "approve:1"}, nil, discordgo.InteractionResponseDeferredMessageUpdate, ""},
		{"press not delivered", channels.Inbound{Action: "approve:1"}, failed, discordgo.InteractionResponseChannelMessageWithSource, "Sorry, your choice did not go through. Please try again."},
	}
	for _, tt := range tests {
		r := ackResponse(tt.in, tt.err)
		var note string
		if r.Data != nil {
			note = r.Data.Content
			if r.Data.Flags != discordgo.MessageFlagsEphemeral {
				t.Errorf("%s: flags = %d, want ephemeral", tt.name, r.Data.Flags)
			}
		}
		if r.Type != tt.wantType || note != tt.wantNote {
			t.Errorf("%s: response type %d %q, want %d %q", tt.name, r.Type, note, tt.wantType, tt.wantNote)
		}
	}
}

func TestButtonRows(t *testing.T) {
	buttons := func(n int) []channels.Button {
		var bs []channels.Button
		for i := range n {
			bs = append(bs, channels.Button{Label: fmt.Sprint("Option ", i), Action: fmt.Sprint("pick:", i)})
		}
		return bs
	}
	layout := func(rows []discordgo.MessageComponent) []int {
		var n []int
		for _, r := range rows {
			n = append(n, len(r.(discordgo.ActionsRow).Components))
		}
		return n
	}
	for _, tt := range []struct {
		n    int
		want []int
	}{{1, []int{1}}, {5, []int{5}}, {6, []int{5, 1}}, {25, []int{5, 5, 5, 5, 5}}} {
		rows, err := buttonRows(buttons(tt.n))
		if err != nil || !slices.Equal(layout(rows), tt.want) {
			t.Errorf("%d buttons: rows %v, %v; want %v", tt.n, layout(rows), err, tt.want)
		}
	}

	rows, err := buttonRows([]channels.Button{
		{Label: "Approve", Action: "approve:12"}, {Label: "Deny", Action: "deny:12"}, {Label: "Stop", Action: "stop"},
		{Label: strings.Repeat("long ", 20), Action: strings.Repeat("é", 100)},
	})
	if err != nil {
		t.Fatal(err)
	}
	var got []discordgo.Button
	for _, c := range rows[0].(discordgo.ActionsRow).Components {
		got = append(got, c.(discordgo.Button))
	}
	if got[0].Style != discordgo.PrimaryButton || got[1].Style != discordgo.DangerButton || got[2].Style != discordgo.DangerButton ||
		got[0].CustomID != "approve:12" || got[0].Label != "Approve" {
		t.Errorf("buttons = %+v", got)
	}
	if l := got[3].Label; utf8.RuneCountInString(l) != 80 || !strings.HasSuffix(l, "…") || got[3].CustomID != strings.Repeat("é", 100) {
		t.Errorf("long button = %q (%d chars), custom_id %d chars; want the label cut to 80, the 100-char action kept",
			l, utf8.RuneCountInString(l), utf8.RuneCountInString(got[3].CustomID))
	}

	for _, tt := range []struct {
		name    string
		buttons []channels.Button
		wantErr string
	}{
		{"action over 100 characters", []channels.Button{{Label: "Go", Action: strings.Repeat("a", 101)}}, "101 characters, Discord allows at most 100"},
		{"no action", []channels.Button{{Label: "Go"}}, "has no action"},
		{"no label", []channels.Button{{Label: "", Action: "go"}}, "has no label"},
		{"same action twice", []channels.Button{{Label: "Yes", Action: "go"}, {Label: "Sure", Action: "go"}}, "used twice"},
		{"no buttons", nil, "no buttons"},
		{"too many", buttons(26), "at most 25"},
	} {
		if _, err := buttonRows(tt.buttons); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("%s: err = %v, want %q", tt.name, err, tt.wantErr)
		}
	}
}
