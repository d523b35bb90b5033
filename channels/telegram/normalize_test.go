package telegram

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/channels"
)

const testBotID = 123

func testNormalizer(files map[string][]byte) *normalizer {
	return &normalizer{
		botID:       testBotID,
		botName:     "switchboard_bot",
		maxDownload: 1000,
		textMax:     100,
		log:         slog.New(slog.DiscardHandler),
		fetch: func(_ context.Context, id string, known, max int64) ([]byte, error) {
			d, ok := files[id]
			switch {
			case !ok:
				return nil, errors.New("telegram: getFile: Bad Request: invalid file_id")
			case known > max || int64(len(d)) > max:
				return nil, errTooLarge
			}
			return d, nil
		},
	}
}

func decodeUpdate(t *testing.T, js string) update {
	t.Helper()
	var u update
	if err := json.Unmarshal([]byte(js), &u); err != nil {
		t.Fatalf("decode %s: %v", js, err)
	}
	return u
}

// Payloads below are shaped like real Bot API updates (fields trimmed).
const (
	privateText = `{"update_id":1,"message":{"message_id":11,"date":1700000000,
		"from":{"id":42,"is_bot":false,"first_name":"Ada","last_name":"Lovelace","username":"ada","language_code":"en"},
		"chat":{"id":42,"first_name":"Ada","last_name":"Lovelace","username":"ada","type":"private"},
		"text":"hello bot"}}`
	groupPlain = `{"update_id":2,"message":{"message_id":12,"date":1700000001,
		"from":{"id":42,"is_bot":false,"first_name":"Ada","username":"ada"},
		"chat":{"id":-1001234567890,"title":"Engines","type":"supergroup"},
		"text":"just chatting"}}`
	groupMention = `{"update_id":3,"message":{"message_id":13,"date":1700000002,
		"from":{"id":42,"is_bot":false,"first_name":"Ada","username":"ada"},
		"chat":{"id":-1001234567890,"title":"Engines","type":"supergroup"},
		"text":"hey @Switchboard_Bot what's 2+2?","entities":[{"offset":4,"length":16,"type":"mention"}]}}`
	groupMentionFirst = `{"update_id":3,"message":{"message_id":13,"date":1700000002,
		"from":{"id":42,"is_bot":false,"first_name":"Ada","username":"ada"},
		"chat":{"id":-100,"title":"Engines","type":"supergroup"},
		"text":"@switchboard_bot, summarise 😀 this","entities":[{"offset":0,"length":16,"type":"mention"}]}}`
	groupOtherMention = `{"update_id":4,"message":{"message_id":14,"date":1700000003,
		"from":{"id":42,"is_bot":false,"first_name":"Ada"},
		"chat":{"id":-100,"title":"Engines","type":"supergroup"},
		"text":"ask @other_bot","entities":[{"offset":4,"length":10,"type":"mention"}]}}`
	groupCommandAt = `{"update_id":5,"message":{"message_id":15,"date":1700000004,
		"from":{"id":42,"is_bot":false,"first_name":"Ada"},
		"chat":{"id":-100,"title":"Engines","type":"supergroup"},
		"text":"/new@switchboard_bot","entities":[{"offset":0,"length":20,"type":"bot_command"}]}}`
	groupCommandOther = `{"update_id":6,"message":{"message_id":16,"date":1700000005,
		"from":{"id":42,"is_bot":false,"first_name":"Ada"},
		"chat":{"id":-100,"title":"Engines","type":"supergroup"},
		"text":"/new@other_bot","entities":[{"offset":0,"length":14,"type":"bot_command"}]}}`
	groupCommandBare = `{"update_id":7,"message":{"message_id":17,"date":1700000006,
		"from":{"id":42,"is_bot":false,"first_name":"Ada"},
		"chat":{"id":-100,"title":"Engines","type":"supergroup"},
		"text":"/status","entities":[{"offset":0,"length":7,"type":"bot_command"}]}}`
	replyToBot = `{"update_id":8,"message":{"message_id":18,"date":1700000007,
		"from":{"id":42,"is_bot":false,"first_name":"Ada","username":"ada"},
		"chat":{"id":-100,"title":"Engines","type":"supergroup"},
		"reply_to_message":{"message_id":9,"date":1699999999,
			"from":{"id":123,"is_bot":true,"first_name":"Switchboard","username":"switchboard_bot"},
			"chat":{"id":-100,"title":"Engines","type":"supergroup"},"text":"The answer is 4. Anything else?"},
		"quote":{"text":"The answer is 4.","position":0,"is_manual":true},
		"text":"why?"}}`
	replyToUser = `{"update_id":9,"message":{"message_id":19,"date":1700000008,
		"from":{"id":42,"is_bot":false,"first_name":"Ada"},
		"chat":{"id":-100,"title":"Engines","type":"supergroup"},
		"reply_to_message":{"message_id":8,"date":1699999999,
			"from":{"id":7,"is_bot":false,"first_name":"Charles","last_name":"Babbage"},
			"chat":{"id":-100,"title":"Engines","type":"supergroup"},"photo":[{"file_id":"p","file_unique_id":"u","width":1,"height":1}]},
		"text":"nice"}}`
	forumTopic = `{"update_id":10,"message":{"message_id":20,"date":1700000009,"message_thread_id":5,"is_topic_message":true,
		"from":{"id":42,"is_bot":false,"first_name":"Ada"},
		"chat":{"id":-1009,"title":"Forum","is_forum":true,"type":"supergroup"},
		"reply_to_message":{"message_id":5,"date":1699990000,"message_thread_id":5,
			"from":{"id":123,"is_bot":true,"first_name":"Switchboard","username":"switchboard_bot"},
			"chat":{"id":-1009,"title":"Forum","is_forum":true,"type":"supergroup"},
			"forum_topic_created":{"name":"Releases","icon_color":7322096}},
		"text":"topic message"}}`
	anonymousAdmin = `{"update_id":11,"message":{"message_id":21,"date":1700000010,
		"from":{"id":1087968824,"is_bot":true,"first_name":"Group","username":"GroupAnonymousBot"},
		"sender_chat":{"id":-100,"title":"Engines","type":"supergroup"},
		"chat":{"id":-100,"title":"Engines","type":"supergroup"},
		"text":"admin speaking"}}`
	edited = `{"update_id":12,"edited_message":{"message_id":11,"date":1700000000,"edit_date":1700000100,
		"from":{"id":42,"is_bot":false,"first_name":"Ada"},
		"chat":{"id":42,"first_name":"Ada","type":"private"},
		"text":"hello bot, fixed"}}`
)

func TestNormalize(t *testing.T) {
	tests := []struct {
		name    string
		payload string
		want    channels.Inbound
	}{
		{"private text", privateText, channels.Inbound{
			Channel: "telegram", ChatID: "42", ChatType: channels.DM, MessageID: "11",
			UserID: "42", UserName: "ada", DisplayName: "Ada Lovelace",
			Text: "hello bot", Mentioned: true, Time: time.Unix(1700000000, 0).UTC(),
		}},
		{"group without mention", groupPlain, channels.Inbound{
			Channel: "telegram", ChatID: "-1001234567890", ChatType: channels.Group, ChatTitle: "Engines", MessageID: "12",
			UserID: "42", UserName: "ada", DisplayName: "Ada",
			Text: "just chatting", Mentioned: false, Time: time.Unix(1700000001, 0).UTC(),
		}},
		{"group with mention (case-insensitive), stripped", groupMention, channels.Inbound{
			Channel: "telegram", ChatID: "-1001234567890", ChatType: channels.Group, ChatTitle: "Engines", MessageID: "13",
			UserID: "42", UserName: "ada", DisplayName: "Ada",
			Text: "hey what's 2+2?", Mentioned: true, Time: time.Unix(1700000002, 0).UTC(),
		}},
		{"reply to bot with quote", replyToBot, channels.Inbound{
			Channel: "telegram", ChatID: "-100", ChatType: channels.Group, ChatTitle: "Engines", MessageID: "18",
			UserID: "42", UserName: "ada", DisplayName: "Ada",
			Text: "why?", Mentioned: true, Time: time.Unix(1700000007, 0).UTC(),
			Quote: &channels.Quote{MessageID: "9", Author: "@switchboard_bot", Text: "The answer is 4.", FromBot: true},
		}},
		{"reply to a user's photo", replyToUser, channels.Inbound{
			Channel: "telegram", ChatID: "-100", ChatType: channels.Group, ChatTitle: "Engines", MessageID: "19",
			UserID: "42", DisplayName: "Ada", Text: "nice", Time: time.Unix(1700000008, 0).UTC(),
			Quote: &channels.Quote{MessageID: "8", Author: "Charles Babbage", Text: "[photo]"},
		}},
		{"forum topic: own chat, topic creation is not a reply", forumTopic, channels.Inbound{
			Channel: "telegram", ChatID: "-1009:topic:5", ChatType: channels.Group, ChatTitle: "Forum / Releases", MessageID: "20",
			UserID: "42", DisplayName: "Ada", Text: "topic message", Mentioned: false, Time: time.Unix(1700000009, 0).UTC(),
		}},
		{"anonymous admin", anonymousAdmin, channels.Inbound{
			Channel: "telegram", ChatID: "-100", ChatType: channels.Group, ChatTitle: "Engines", MessageID: "21",
			UserID: "-100", DisplayName: "Engines", Text: "admin speaking", Time: time.Unix(1700000010, 0).UTC(),
		}},
	}
	n := testNormalizer(nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := decodeUpdate(t, tt.payload)
			got := n.inbound(t.Context(), u.Message, false)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("inbound =\n%+v\nwant\n%+v", got, tt.want)
				if got.Quote != nil && tt.want.Quote != nil {
					t.Errorf("quote = %+v, want %+v", *got.Quote, *tt.want.Quote)
				}
			}
		})
	}
}

func TestNormalizeEdited(t *testing.T) {
	u := decodeUpdate(t, edited)
	got := testNormalizer(nil).inbound(t.Context(), u.EditedMessage, true)
	if got.MessageID != "11:edit:1700000100" {
		t.Errorf("MessageID = %q, want %q", got.MessageID, "11:edit:1700000100")
	}
	if got.Text != "(edited) hello bot, fixed" {
		t.Errorf("Text = %q, want the edited text with the prefix", got.Text)
	}
	if !got.Time.Equal(time.Unix(1700000100, 0)) {
		t.Errorf("Time = %v, want the edit time", got.Time)
	}
}

// Button presses, shaped like real callback_query updates (fields trimmed).
const (
	pressPrivate = `{"update_id":30,"callback_query":{"id":"4382bfdwdsb323b2d9","chat_instance":"-845739450938",
		"from":{"id":42,"is_bot":false,"first_name":"Ada","last_name":"Lovelace","username":"ada","language_code":"en"},
		"message":{"message_id":31,"date":1700000020,
			"from":{"id":123,"is_bot":true,"first_name":"Switchboard","username":"switchboard_bot"},
			"chat":{"id":42,"first_name":"Ada","username":"ada","type":"private"},
			"text":"Run rm -rf build?","entities":[{"offset":4,"length":12,"type":"bold"}],
			"reply_markup":{"inline_keyboard":[[{"text":"Approve","callback_data":"approve:12"},{"text":"Deny","callback_data":"deny:12"}]]}},
		"data":"approve:12"}}`
	pressTopic = `{"update_id":31,"callback_query":{"id":"5190000000000000001","chat_instance":"9","data":"deny:12",
		"from":{"id":7,"is_bot":false,"first_name":"Charles"},
		"message":{"message_id":32,"date":1700000021,"message_thread_id":5,"is_topic_message":true,
			"from":{"id":123,"is_bot":true,"first_name":"Switchboard","username":"switchboard_bot"},
			"chat":{"id":-1009,"title":"Forum","is_forum":true,"type":"supergroup"},
			"reply_to_message":{"message_id":5,"date":1700000000,"message_thread_id":5,"is_topic_message":true,
				"from":{"id":42,"is_bot":false,"first_name":"Ada"},
				"chat":{"id":-1009,"title":"Forum","is_forum":true,"type":"supergroup"},
				"forum_topic_created":{"name":"Releases","icon_color":7322096}},
			"text":"Deploy?"}}}`
	pressInaccessible = `{"update_id":32,"callback_query":{"id":"77","chat_instance":"9","data":"approve:3",
		"from":{"id":42,"is_bot":false,"first_name":"Ada","username":"ada"},
		"message":{"message_id":33,"date":0,"chat":{"id":-100,"title":"Engines","type":"supergroup"}}}}`
)

func TestNormalizePress(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		payload string
		want    channels.Inbound
	}{
		{"private chat", pressPrivate, channels.Inbound{
			Channel: "telegram", ChatID: "42", ChatType: channels.DM, MessageID: "cb:4382bfdwdsb323b2d9",
			UserID: "42", UserName: "ada", DisplayName: "Ada Lovelace", Mentioned: true, Time: now, Action: "approve:12",
			Quote: &channels.Quote{MessageID: "31", Author: "@switchboard_bot", Text: "Run rm -rf build?", FromBot: true},
		}},
		{"forum topic: the topic's chat, pressed by another user", pressTopic, channels.Inbound{
			Channel: "telegram", ChatID: "-1009:topic:5", ChatType: channels.Group, ChatTitle: "Forum / Releases",
			MessageID: "cb:5190000000000000001", UserID: "7", DisplayName: "Charles", Mentioned: true, Time: now, Action: "deny:12",
			Quote: &channels.Quote{MessageID: "32", Author: "@switchboard_bot", Text: "Deploy?", FromBot: true},
		}},
		{"message too old to show", pressInaccessible, channels.Inbound{
			Channel: "telegram", ChatID: "-100", ChatType: channels.Group, ChatTitle: "Engines", MessageID: "cb:77",
			UserID: "42", UserName: "ada", DisplayName: "Ada", Mentioned: true, Time: now, Action: "approve:3",
			Quote: &channels.Quote{MessageID: "33", Author: "@switchboard_bot", FromBot: true},
		}},
	}
	n := testNormalizer(nil)
	n.now = func() time.Time { return now }
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := decodeUpdate(t, tt.payload)
			got := n.press(t.Context(), u.CallbackQuery)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("press =\n%+v\nwant\n%+v", got, tt.want)
				if got.Quote != nil && tt.want.Quote != nil {
					t.Errorf("quote = %+v, want %+v", *got.Quote, *tt.want.Quote)
				}
			}
		})
	}
}

func TestMentionRules(t *testing.T) {
	tests := []struct {
		name, payload, text string
		mentioned           bool
	}{
		{"mention first, punctuation and emoji", groupMentionFirst, "summarise 😀 this", true},
		{"other bot mentioned", groupOtherMention, "ask @other_bot", false},
		{"command addressed to us", groupCommandAt, "/new", true},
		{"command addressed to another bot", groupCommandOther, "/new@other_bot", false},
		{"bare command in a group", groupCommandBare, "/status", true},
	}
	n := testNormalizer(nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := decodeUpdate(t, tt.payload).Message
			got := n.inbound(t.Context(), m, false)
			if got.Text != tt.text || got.Mentioned != tt.mentioned {
				t.Errorf("Text, Mentioned = %q, %v; want %q, %v", got.Text, got.Mentioned, tt.text, tt.mentioned)
			}
		})
	}
}

func TestStripMentionsMalformedEntities(t *testing.T) {
	// Offsets past the end or overlapping must not panic or cut wrongly.
	m := decodeUpdate(t, `{"update_id":1,"message":{"message_id":1,"date":1,"chat":{"id":-1,"type":"group"},
		"text":"@switchboard_bot hi","entities":[{"offset":0,"length":16,"type":"mention"},
		{"offset":5,"length":99,"type":"mention"},{"offset":-3,"length":2,"type":"bot_command"},
		{"offset":2,"length":16,"type":"mention"}]}}`).Message
	got := testNormalizer(nil).inbound(t.Context(), m, false)
	if got.Text != "hi" || !got.Mentioned {
		t.Errorf("Text, Mentioned = %q, %v; want %q, true", got.Text, got.Mentioned, "hi")
	}
}

func TestAttachments(t *testing.T) {
	jpeg := append([]byte{0xFF, 0xD8, 0xFF, 0xE0}, []byte("jfif-data")...)
	files := map[string][]byte{
		"photo-small": []byte("small"), "photo-big": jpeg,
		"notes": []byte("# notes\nline"), "voice": []byte("OggS..."),
		"binary": {0xff, 0xfe, 0x00}, "bigtext": []byte(strings.Repeat("x", 500)),
	}
	tests := []struct {
		name, msg string
		want      []channels.Attachment
	}{
		{"photo: largest size downloaded",
			`"photo":[{"file_id":"photo-small","file_unique_id":"a","width":90,"height":60,"file_size":5},
			          {"file_id":"photo-big","file_unique_id":"b","width":1280,"height":853,"file_size":13}],"caption":"look"`,
			[]channels.Attachment{{Kind: channels.Image, Name: "photo.jpg", MIME: "image/jpeg", Size: 13, Data: jpeg}}},
		{"photo over the cap",
			`"photo":[{"file_id":"photo-big","file_unique_id":"b","width":1280,"height":853,"file_size":5000}]`,
			[]channels.Attachment{{Kind: channels.Image, Name: "photo.jpg", MIME: "image/jpeg", Size: 5000, Note: "not downloaded: larger than 1000 bytes"}}},
		{"small text document inlined",
			`"document":{"file_id":"notes","file_unique_id":"n","file_name":"notes.md","mime_type":"text/markdown","file_size":13}`,
			[]channels.Attachment{{Kind: channels.File, Name: "notes.md", MIME: "text/markdown", Size: 13, Data: files["notes"], Text: "# notes\nline"}}},
		{"text document by extension, over the text cap",
			`"document":{"file_id":"bigtext","file_unique_id":"n","file_name":"big.yaml","mime_type":"application/octet-stream","file_size":500}`,
			[]channels.Attachment{{Kind: channels.File, Name: "big.yaml", MIME: "application/octet-stream", Size: 500, Note: "not downloaded: larger than 100 bytes"}}},
		{"binary document described only",
			`"document":{"file_id":"binary","file_unique_id":"x","file_name":"a.pdf","mime_type":"application/pdf","file_size":3}`,
			[]channels.Attachment{{Kind: channels.File, Name: "a.pdf", MIME: "application/pdf", Size: 3, Note: "not downloaded"}}},
		{"voice downloaded",
			`"voice":{"file_id":"voice","file_unique_id":"v","duration":2,"mime_type":"audio/ogg","file_size":7}`,
			[]channels.Attachment{{Kind: channels.Audio, Name: "voice.ogg", MIME: "audio/ogg", Size: 7, Data: files["voice"]}}},
		{"download failure noted",
			`"audio":{"file_id":"gone","file_unique_id":"g","duration":2,"file_name":"song.mp3","mime_type":"audio/mpeg","file_size":7}`,
			[]channels.Attachment{{Kind: channels.Audio, Name: "song.mp3", MIME: "audio/mpeg", Size: 7, Note: "download failed: telegram: getFile: Bad Request: invalid file_id"}}},
		{"sticker described",
			`"sticker":{"file_id":"s","file_unique_id":"s","width":512,"height":512,"emoji":"😀","set_name":"Animals","is_animated":false}`,
			[]channels.Attachment{{Kind: channels.Sticker, Name: "Animals", Note: "sticker 😀 from set Animals"}}},
		{"location described",
			`"location":{"latitude":52.52,"longitude":13.405}`,
			[]channels.Attachment{{Kind: channels.Location, Note: "location 52.520000, 13.405000"}}},
		{"venue described",
			`"location":{"latitude":52.52,"longitude":13.405},"venue":{"location":{"latitude":52.52,"longitude":13.405},"title":"Tor","address":"Pariser Platz"}`,
			[]channels.Attachment{{Kind: channels.Location, Note: `venue "Tor", Pariser Platz (52.520000, 13.405000)`}}},
	}
	n := testNormalizer(files)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			js := `{"update_id":1,"message":{"message_id":1,"date":1,"from":{"id":42,"first_name":"Ada"},"chat":{"id":42,"type":"private"},` + tt.msg + `}}`
			got := n.inbound(t.Context(), decodeUpdate(t, js).Message, false)
			if !reflect.DeepEqual(got.Attachments, tt.want) {
				t.Errorf("attachments =\n%+v\nwant\n%+v", got.Attachments, tt.want)
			}
		})
	}
}

func TestIsTextFile(t *testing.T) {
	tests := []struct {
		mime, name string
		want       bool
	}{
		{"text/plain", "a", true},
		{"text/csv; charset=utf-8", "", true},
		{"application/json", "", true},
		{"application/vnd.api+json", "", true},
		{"application/x-yaml", "", true},
		{"application/octet-stream", "config.YML", true},
		{"", "README.md", true},
		{"application/pdf", "a.pdf", false},
		{"image/png", "x.png", false},
	}
	for _, tt := range tests {
		if got := isTextFile(tt.mime, tt.name); got != tt.want {
			t.Errorf("isTextFile(%q, %q) = %v, want %v", tt.mime, tt.name, got, tt.want)
		}
	}
}

func TestParseChatID(t *testing.T) {
	tests := []struct {
		in      string
		want    chatRef
		wantErr bool
	}{
		{"42", chatRef{id: 42}, false},
		{"-1001234567890", chatRef{id: -1001234567890}, false},
		{"-1009:topic:5", chatRef{id: -1009, thread: 5}, false},
		{"", chatRef{}, true},
		{"abc", chatRef{}, true},
		{"-1:topic:x", chatRef{}, true},
		{"-1:topic:0", chatRef{}, true},
	}
	for _, tt := range tests {
		got, err := parseChatID(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("parseChatID(%q) = %+v, %v; want %+v, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
		if err == nil && got.String() != tt.in {
			t.Errorf("chatRef(%q).String() = %q", tt.in, got.String())
		}
	}
}

// FuzzNormalize feeds arbitrary update JSON to the normaliser: whatever
// decodes must normalise without panicking (the poll loop also recovers,
// but a panic would still drop the message).
func FuzzNormalize(f *testing.F) {
	for _, p := range []string{privateText, groupMention, groupMentionFirst, groupCommandAt, replyToBot, forumTopic, anonymousAdmin, edited,
		pressPrivate, pressTopic, pressInaccessible} {
		f.Add(p)
	}
	n := testNormalizer(map[string][]byte{"p": []byte("x")})
	f.Fuzz(func(t *testing.T, payload string) {
		var u update
		if json.Unmarshal([]byte(payload), &u) != nil {
			return
		}
		for _, m := range []*message{u.Message, u.EditedMessage} {
			if m == nil || m.Chat == nil {
				continue
			}
			in := n.inbound(t.Context(), m, m == u.EditedMessage)
			if in.ChatID == "" || in.MessageID == "" {
				t.Fatalf("no ChatID/MessageID for %s", payload)
			}
		}
		// The adapter normalises a press only with a message in a chat.
		if cb := u.CallbackQuery; cb != nil && cb.Message != nil && cb.Message.Chat != nil {
			in := n.press(t.Context(), cb)
			if in.ChatID == "" || in.MessageID == "" || in.Quote == nil || !in.Mentioned {
				t.Fatalf("press without ChatID/MessageID/Quote/Mentioned for %s", payload)
			}
		}
	})
}
