package discord

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"

	"switchboard/channels"
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
	got := attachments(t.Context(), m, 1024, get)
	if len(got) != 3 {
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
	in, ok := interactionInbound(guild)
	if !ok || in.Text != "/status" || in.ChatID != "c" || in.ChatType != channels.Group || in.UserID != "u1" ||
		in.DisplayName != "Al" || !in.Mentioned || in.MessageID != "1400000000000000000" || in.Time.IsZero() {
		t.Errorf("guild command = %+v, %v", in, ok)
	}
	dm := decode(`{"id":"1","application_id":"900","type":2,"channel_id":"d","token":"tok",
		"data":{"id":"cmd","name":"new","type":1},"user":{"id":"u1","username":"alice","global_name":"Alice"},"version":1}`)
	if in, ok := interactionInbound(dm); !ok || in.ChatType != channels.DM || in.Text != "/new" || in.DisplayName != "Alice" {
		t.Errorf("dm command = %+v, %v", in, ok)
	}
	button := decode(`{"id":"2","application_id":"900","type":3,"channel_id":"d","token":"tok",
		"data":{"custom_id":"x","component_type":2},"user":{"id":"u1","username":"alice"},"version":1}`)
	if _, ok := interactionInbound(button); ok {
		t.Error("component interaction accepted")
	}
}
