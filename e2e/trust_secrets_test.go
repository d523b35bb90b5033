package e2e

// Issue 29 through the real wiring: a secret in a tool's result is kept out
// of the store, the dashboard, the model request and the chat; a runaway
// reply is cut; strangers get one pairing reply, and a message without an
// author none.

import (
	"database/sql"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/switchboard-gateway/switchboard/channels/telegram"
	"github.com/switchboard-gateway/switchboard/config"
	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/internal/tgfake"
	"github.com/switchboard-gateway/switchboard/llm"
	"github.com/switchboard-gateway/switchboard/store"
)

// trustHTTPToken is the dashboard's token in these tests.
const trustHTTPToken = "trust-http-token-FAKE-0123456789"

// storedTexts returns every text value in every table of the SQLite file
// (messages, turns, checkpoints, inbox, outbox…), one per line.
func storedTexts(t *testing.T, file string) string {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+file+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.QueryContext(t.Context(), `SELECT name FROM sqlite_master WHERE type = 'table'`)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, name)
	}
	rows.Close()
	var b strings.Builder
	for _, table := range tables {
		rows, err := db.QueryContext(t.Context(), fmt.Sprintf("SELECT * FROM %q", table))
		if err != nil {
			continue // a virtual table's shadow (FTS) may not be readable alone
		}
		cols, _ := rows.Columns()
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			for _, v := range vals {
				switch v := v.(type) {
				case string:
					b.WriteString(v + "\n")
				case []byte:
					b.WriteString(string(v) + "\n")
				}
			}
		}
		rows.Close()
	}
	return b.String()
}

// dashboardGet fetches a dashboard page with the token.
func dashboardGet(t *testing.T, base, path string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(waitCtx(t), http.MethodGet, base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+trustHTTPToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestSecretInToolOutputStaysOut: a file holding the model's API key and
// the bot token is read by the file tool; the model answers quoting them.
// Neither reaches the store, the dashboard, the next model request or the
// chat; the markers do.
func TestSecretInToolOutputStaysOut(t *testing.T) {
	tg := tgfake.New(t, tgToken)
	work := t.TempDir()
	leak := "deploy notes\nOPENAI_API_KEY=" + e2eAPIKey + "\nbot=" + tgToken + "\n"
	if err := os.WriteFile(filepath.Join(work, "notes.txt"), []byte(leak), 0o600); err != nil {
		t.Fatal(err)
	}
	var dbFile string
	s := startTelegramServe(t, tg, allowUsers(tgAlice), func(c *config.Config) {
		c.Tools.Files.Enabled, c.Tools.Files.Root = true, work
		c.HTTP.Listen, c.HTTP.Token = "127.0.0.1:0", trustHTTPToken
		dbFile = c.Store.Path
	})
	if err := waitLog(s.ctx(t), s.stderr, "http listening"); err != nil {
		t.Fatal(err)
	}
	m := secListen.FindStringSubmatch(logLine(s.stderr, "http listening"))
	if m == nil {
		t.Fatalf("no address in %q", logLine(s.stderr, "http listening"))
	}
	base := "http://" + m[1]

	s.answer("what do my notes say?",
		testkit.Reply{ToolCalls: []llm.ToolCall{testkit.Call("c1", "file_read", `{"path":"notes.txt"}`)}},
		// A model that repeats what it was given (or knew the key anyway).
		testkit.Reply{Text: "Your notes hold the key " + e2eAPIKey + " and the token " + tgToken + "."})
	s.say(tgAlice, tgAlice, "alice", "what do my notes say?")
	reply := s.waitSent(t, tgAlice, 1)[0].Text
	s.expect(tgAlice, 1)

	secrets := map[string]string{"API key": e2eAPIKey, "bot token": tgToken}
	checkSecretsAbsent(t, "the chat reply", reply, secrets)
	if !strings.Contains(reply, "[redacted") {
		t.Errorf("the reply %q carries no redaction marker", reply)
	}
	// The model saw the file's result with markers, not the secrets.
	var toolResult string
	for _, r := range s.fake.Requests() {
		for _, msg := range r.Messages {
			if msg.Role == llm.RoleTool {
				toolResult = msg.Content
			}
			checkSecretsAbsent(t, "a model request's "+string(msg.Role)+" message", msg.Content, secrets)
		}
	}
	if !strings.Contains(toolResult, "deploy notes") || !strings.Contains(toolResult, "[redacted") {
		t.Errorf("the tool result sent to the model = %q, want the file with markers", toolResult)
	}
	// The dashboard's pages of the turn, the chat and the session.
	var pages strings.Builder
	for _, path := range []string{"/", "/chats", "/chats/1", "/sessions/1", "/turns/1"} {
		code, body := dashboardGet(t, base, path)
		if code != http.StatusOK {
			t.Errorf("GET %s: %d", path, code)
		}
		pages.WriteString(body)
	}
	if !strings.Contains(pages.String(), "deploy notes") {
		t.Errorf("no dashboard page shows the tool's result")
	}
	checkSecretsAbsent(t, "the dashboard", pages.String(), secrets)

	s.finish(t)
	stored := storedTexts(t, dbFile)
	if !strings.Contains(stored, "deploy notes") {
		t.Fatalf("the store holds no tool result: the scan proves nothing")
	}
	checkSecretsAbsent(t, "the store", stored, secrets)
}

// TestRunawayReplyIsCut: a 200 KB answer reaches Telegram cut at
// channels.reply_max_chars (16,000) with a note, in a few messages rather
// than fifty.
func TestRunawayReplyIsCut(t *testing.T) {
	s := startTelegramServe(t, tgfake.New(t, tgToken), allowUsers(tgAlice))
	huge := strings.Repeat("All work and no play makes a dull reply. ", 200_000/41)
	s.answer("dump it all", testkit.Reply{Text: huge})
	s.say(tgAlice, tgAlice, "alice", "dump it all")
	ctx := s.ctx(t)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !slices.ContainsFunc(sentTo(s.tg.Sent(), tgAlice), func(m tgfake.SentMessage) bool { return strings.Contains(m.Text, "[reply cut at") }) {
		select {
		case <-ctx.Done():
			t.Fatalf("no message says the reply was cut; sent %d messages\n%s", len(sentTo(s.tg.Sent(), tgAlice)), s.stderr.String())
		case <-tick.C:
		}
	}
	sent := sentTo(s.tg.Sent(), tgAlice)
	s.expect(tgAlice, len(sent)) // and no more once serve has drained
	s.finish(t)
	if len(sent) == 0 || len(sent) > 5 {
		t.Fatalf("a 200 KB reply became %d Telegram messages, want 1 to 5", len(sent))
	}
	total := 0
	for _, m := range sent {
		total += utf8.RuneCountInString(m.Text)
	}
	if total > 16_500 {
		t.Errorf("%d characters sent, want about 16000", total)
	}
	if last := sent[len(sent)-1].Text; !strings.Contains(last, "[reply cut at 16000 characters]") {
		t.Errorf("the last message does not say the reply was cut: …%q", last[max(0, len(last)-80):])
	}
}

// TestStrangersGetOnePairingReply: a stranger writing five times gets one
// pairing code; a message without an author (an update without from) gets
// none, and no pairing is stored for the empty user id.
func TestStrangersGetOnePairingReply(t *testing.T) {
	tg := tgfake.New(t, tgToken)
	var dbFile string
	s := startTelegramServe(t, tg, func(c *telegram.Config) { c.Pairing = true }, func(c *config.Config) { dbFile = c.Store.Path })
	for i := range 5 {
		s.say(tgMallory, tgMallory, "mallory", fmt.Sprintf("let me in (%d)", i+1))
	}
	const anonChat int64 = 5999
	anon := tg.NewMessage(anonChat, anonChat, "", "no author here")
	delete(anon, "from")
	last := tg.PushMessage(anon)
	// Every update taken in (a stranger is answered before the offset
	// moves on), so the count below is final.
	if err := tg.WaitOffset(s.ctx(t), last+1); err != nil {
		t.Fatal(err)
	}
	s.waitSent(t, tgMallory, 1)
	if n := strings.Count(s.stderr.String(), "refused a message without a user id"); n != 1 {
		t.Errorf("the message without an author was logged %d times, want once", n)
	}
	s.expect(tgMallory, 1) // checked once serve has drained: no more replies
	s.expect(anonChat, 0)
	s.finish(t)

	st, err := store.Open(t.Context(), dbFile)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	list, err := st.PendingPairings(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].UserID != fmt.Sprint(tgMallory) {
		t.Errorf("pending pairings = %+v, want mallory's one", list)
	}
	if ok, _ := st.IsApproved(t.Context(), "telegram", ""); ok {
		t.Errorf("the empty user id is approved")
	}
}
