package httpapi

// A test that drives the dashboard in a real browser: headless Chromium
// (Debian's chromium package) through chromedp. It is installed by .ci/run;
// under CI=true a missing browser fails the test, elsewhere it skips it
// with a message saying what to install (testkit.Missing). The chat API's
// test with the official openai npm client is in channels/chatapi.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/internal/chatfake"
	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/llm"
	"github.com/switchboard-gateway/switchboard/router"
	"github.com/switchboard-gateway/switchboard/store"
)

// chromium finds Debian's chromium (or $CHROME_PATH).
func chromium(t *testing.T) string {
	t.Helper()
	for _, p := range []string{os.Getenv("CHROME_PATH"), "/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if p == "" {
			continue
		}
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	testkit.Missing(t, "chromium is not installed (apt-get install chromium); the dashboard test drives it headless")
	return ""
}

// artifactDir is where the browser test saves its screenshots: $ARTIFACTS_DIR,
// or .artifacts at the repository root (ignored by git).
func artifactDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("ARTIFACTS_DIR")
	if dir == "" {
		dir = filepath.Join("..", ".artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestDashboardInBrowser(t *testing.T) {
	chrome := chromium(t)
	s := newStack(t, nil)

	// A scripted conversation: a turn with a tool call, and a turn whose
	// tool call fails (an unknown tool).
	s.scriptToolTurn("It is tea time.")
	if got, _ := s.chat("ada", "What time is it?"); got != "It is tea time." {
		t.Fatalf("reply = %q", got)
	}
	s.fake.Push(
		testkit.Reply{ToolCalls: []llm.ToolCall{testkit.Call("c2", "weather_lookup", `{"city":"Paris"}`)}},
		testkit.Reply{Text: "I could not look that up."},
	)
	if got, _ := s.chat("bob", "Weather in Paris?"); got != "I could not look that up." {
		t.Fatalf("reply = %q", got)
	}
	turns, err := s.store.RecentTurns(t.Context(), 10)
	if err != nil || len(turns) != 2 {
		t.Fatalf("turns = %v, %v", turns, err)
	}
	first := turns[1]

	ctx := openBrowser(t, chrome, s.url+"/")
	step := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("browser: %s: %v", what, err)
		}
	}
	step("wait for the recent turns", chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`#recent tr.turn`))))
	recent, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`#recent`)))
	step("read the recent turns", err)
	total, err := chromedp.Run(ctx, chromedp.AttributeValue(chromedp.CSS(`#usage-chart`), "data-total"))
	step("read the chart", err)
	bars, err := chromedp.Run(ctx, chromedp.Evaluate[int](
		`Array.from(document.querySelectorAll('#usage-chart rect')).filter(r => r.getBBox().height > 0).length`))
	step("measure the chart's bars", err)
	// The live area refreshes itself: its script ran under the page's CSP.
	step("wait for a live refresh", chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`#live-area[data-updated]`))))
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	step("screenshot the dashboard", err)
	step("open the turn", chromedp.Do(ctx,
		chromedp.Navigate(fmt.Sprintf("%s/turns/%d", s.url, first.ID)),
		chromedp.WaitVisible(chromedp.CSS(`#tool-calls tr.tool-call`))))
	turnPage, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`main`)))
	step("read the turn page", err)
	turnShot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	step("screenshot the turn page", err)

	dir := artifactDir(t)
	for name, img := range map[string][]byte{"dashboard.png": shot, "dashboard-turn.png": turnShot} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, img, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s", path)
	}

	for _, want := range []string{fmt.Sprintf("#%d", first.ID), "current_time", "weather_lookup", "completed", "end_turn"} {
		if !strings.Contains(recent, want) {
			t.Errorf("recent turns lack %q:\n%s", want, recent)
		}
	}
	// Two turns: 128+162 tokens, and the fake's estimate for the second.
	if n, err := strconv.Atoi(total.Value); err != nil || n <= 290 {
		t.Errorf("usage chart total = %q, want more than 290", total.Value)
	}
	if bars < 1 {
		t.Errorf("the usage chart draws %d non-empty bars, want at least 1", bars)
	}
	for _, want := range []string{"current_time", "It is tea time.", "What time is it?"} {
		if !strings.Contains(turnPage, want) {
			t.Errorf("turn page lacks %q:\n%s", want, turnPage)
		}
	}
}

// openBrowser starts headless Chromium on first, with extra flags, and
// returns a context for the steps after it (60 s), ended with the test.
func openBrowser(t *testing.T, chrome, first string, flags ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chrome),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox, // root in CI
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 1400),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(t.Context(), append(opts, flags...)...)
	t.Cleanup(cancelAlloc)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	t.Cleanup(cancelBrowser)
	// The first call starts the browser, which lives as long as its context:
	// no timeout on that one (see chromedp.Run); the steps after it have one.
	if err := chromedp.Do(bctx, chromedp.Navigate(first)); err != nil {
		t.Fatalf("browser: open %s: %v", first, err)
	}
	ctx, cancel := context.WithTimeout(bctx, 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// A real browser attacks a server without a token as a web page would:
// evil.example resolves to 127.0.0.1 (DNS rebinding, by the browser's
// resolver rules), and a page on evil.example posts text/plain to the chat
// API. Neither gets anything; the login form of a server with a token
// still works in the same browser (its CSRF token and same-origin POST).
func TestAttacksInBrowser(t *testing.T) {
	chrome := chromium(t)
	s := newStack(t, nil)
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = io.WriteString(w, "<!doctype html><title>evil</title><p>nothing to see</p>")
	}))
	t.Cleanup(evil.Close)
	port := func(u string) string { return u[strings.LastIndex(u, ":")+1:] }
	ctx := openBrowser(t, chrome, "about:blank",
		chromedp.Flag("host-resolver-rules", "MAP evil.example 127.0.0.1"))
	step := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("browser: %s: %v", what, err)
		}
	}

	// DNS rebinding: the dashboard under the attacker's name.
	resp, err := chromedp.RunResponse(ctx, chromedp.Navigate("http://evil.example:"+port(s.url)+"/chats"))
	step("open the dashboard as evil.example", err)
	page, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.documentElement.innerText`))
	step("read the page", err)
	if resp.Status != http.StatusMisdirectedRequest || !strings.Contains(page, "misdirected") || strings.Contains(page, "Chats") {
		t.Errorf("the dashboard as evil.example: %d\n%s", resp.Status, page)
	}

	// A cross-site text/plain POST from the attacker's page.
	step("open the attacker's page", chromedp.Do(ctx,
		chromedp.Navigate("http://evil.example:"+port(evil.URL)+"/")))
	sent, err := chromedp.Run(ctx, chromedp.Evaluate[string](`fetch("`+s.url+`/v1/chat/completions", {
		method: "POST", mode: "no-cors", headers: {"Content-Type": "text/plain"},
		body: JSON.stringify({user: "mallory", messages: [{role: "user", content: "plant a daily job"}]}),
	}).then(() => "answered", e => "failed: " + e)`, chromedp.EvalAwaitPromise))
	step("post from the attacker's page", err)
	if sent != "answered" {
		t.Fatalf("the cross-site fetch: %s", sent)
	}
	if n := s.fake.Calls(); n != 0 {
		t.Errorf("the model got %d requests from the attacker's page, want 0", n)
	}
	if turns, err := s.store.RecentTurns(t.Context(), 10); err != nil || len(turns) != 0 {
		t.Errorf("turns after the attack: %d, %v", len(turns), err)
	}

	// The login form, signed in by a person.
	locked := newStack(t, func(o *Options) { o.Token = testToken })
	step("sign in", chromedp.Do(ctx,
		chromedp.Navigate(locked.url+"/chats"),
		chromedp.SetValue(chromedp.CSS(`input[name="token"]`), testToken),
		chromedp.Submit(chromedp.CSS(`form`)),
		chromedp.WaitVisible(chromedp.CSS(`#chats h1`))))
}

// The official openai npm client (channels/chatapi/testdata/openai-client,
// installed with npm ci if missing) through this server,
// with its Host, Content-Type and Origin checks: SDKs pass them.
func TestOpenAINodeClientThroughServer(t *testing.T) {
	s := newStack(t, func(o *Options) { o.Token = testToken })
	s.scriptToolTurn("It is tea time.")
	s.fake.Push(testkit.Reply{Text: "Streamed, at last."})

	out := testkit.NodeClient(t, filepath.Join("..", "channels", "chatapi", "testdata", "openai-client"), s.url+"/v1", testToken)
	var got struct {
		Models   []string
		Plain    struct{ Content string }
		Stream   struct{ Content string }
		WrongKey any
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("client output %q: %v", out, err)
	}
	if len(got.Models) != 1 || got.Plain.Content != "It is tea time." || got.Stream.Content != "Streamed, at last." || got.WrongKey != float64(401) {
		t.Errorf("the npm client got %+v", got)
	}
}

// The dashboard at a phone's width (390x844, as a mobile browser) and a
// laptop's (1366x768): no page scrolls sideways (wide tables scroll in
// their own box), and a pairing request is approved (at 390) and another
// denied (at 1366) by pressing the page's buttons, signed in with the
// login form. Screenshots of every page at both widths go to the artifact
// directory.
func TestDashboardWidthsInBrowser(t *testing.T) {
	chrome := chromium(t)
	s := newStack(t, func(o *Options) { o.Token = testToken })
	ctx0 := t.Context()

	// Something on every page: a turn with a tool call and a long
	// unbroken word, a named private chat, two pairing requests.
	long := "https://example.com/" + strings.Repeat("a-very-long-path-segment/", 12)
	s.scriptToolTurn("It is tea time. See " + long)
	if got, _ := s.chat("ada", "What time is it? "+long); !strings.HasPrefix(got, "It is tea time.") {
		t.Fatalf("reply = %q", got)
	}
	grace := inboundTurn(t, s.store, channels.Inbound{Channel: "telegram", ChatID: "777001", ChatType: channels.DM, MessageID: "1",
		UserID: "777001", UserName: "grace", DisplayName: "Grace Hopper", Text: "hello"})
	for _, p := range []struct{ user, name, code string }{{"42", "ada_lovelace_with_a_long_username", "ADA22222"}, {"43", "bob", "BOB33333"}} {
		if _, _, err := s.store.PairingCode(ctx0, "telegram", p.user, p.name, p.code, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	turns, err := s.store.RecentTurns(ctx0, 10)
	if err != nil || len(turns) == 0 {
		t.Fatalf("turns = %v, %v", turns, err)
	}
	var apiTurn store.Turn
	for _, tr := range turns {
		if tr.Channel == "http" {
			apiTurn = tr
		}
	}
	pages := []struct{ name, path string }{
		{"overview", "/"},
		{"pairing", "/pairing"},
		{"chats", "/chats"},
		{"chat", fmt.Sprintf("/chats/%d", apiTurn.ChatID)},
		{"chat-named", fmt.Sprintf("/chats/%d", grace.ID)},
		{"turn", fmt.Sprintf("/turns/%d", apiTurn.ID)},
		{"session", fmt.Sprintf("/sessions/%d", apiTurn.SessionID)},
		{"metrics", "/dashboard/metrics"},
		{"webchat", "/webchat"},
		{"search", "/search?q=time"},
	}

	ctx := openBrowser(t, chrome, "about:blank")
	step := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("browser: %s: %v", what, err)
		}
	}
	step("sign in", chromedp.Do(ctx,
		chromedp.Navigate(s.url+"/"),
		chromedp.SetValue(chromedp.CSS(`input[name="token"]`), testToken),
		chromedp.Submit(chromedp.CSS(`form`)),
		chromedp.WaitVisible(chromedp.CSS(`#readiness`))))

	dir := artifactDir(t)
	for _, size := range []struct {
		w, h   int64
		mobile bool
	}{{390, 844, true}, {1366, 768, false}} {
		opts := []chromedp.EmulateViewportOption{chromedp.EmulateLandscape}
		if size.mobile {
			opts = []chromedp.EmulateViewportOption{chromedp.EmulatePortrait, chromedp.EmulateMobile, chromedp.EmulateTouch}
		}
		step(fmt.Sprintf("set the viewport to %dx%d", size.w, size.h), chromedp.Do(ctx, chromedp.EmulateViewport(size.w, size.h, opts...)))
		for _, p := range pages {
			where := fmt.Sprintf("%s at %d px", p.path, size.w)
			step("open "+where, chromedp.Do(ctx, chromedp.Navigate(s.url+p.path), chromedp.WaitVisible(chromedp.CSS(`main .card`))))
			// In a mobile browser a page wider than the screen is zoomed
			// out, widening innerWidth: it must stay the device's width.
			m, err := chromedp.Run(ctx, chromedp.Evaluate[[]int](
				`[document.documentElement.scrollWidth, window.innerWidth, document.documentElement.clientWidth]`))
			step("measure "+where, err)
			if len(m) != 3 || m[0] > m[1] || m[1] != int(size.w) || m[0] > m[2] {
				t.Errorf("%s overflows sideways: scrollWidth, innerWidth, clientWidth = %v, want scrollWidth <= %d", where, m, size.w)
			}
			checkReadable(t, ctx, where, size.w)
			shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
			step("screenshot "+where, err)
			path := filepath.Join(dir, fmt.Sprintf("dashboard-%d-%s.png", size.w, p.name))
			if err := os.WriteFile(path, shot, 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("screenshot: %s", path)
		}

		// A pairing request, approved or denied by its button.
		code, button, flash := "ADA22222", "form.approve button", "Approved request ADA22222"
		if !size.mobile {
			code, button, flash = "BOB33333", "form.deny button", "Denied request BOB33333"
		}
		step(fmt.Sprintf("press %s for %s at %d px", button, code, size.w), chromedp.Do(ctx,
			chromedp.Navigate(s.url+"/pairing"),
			chromedp.Click(chromedp.CSS(fmt.Sprintf(`li.request[data-code=%q] %s`, code, button))),
			chromedp.WaitVisible(chromedp.CSS(`p.flash.ok`))))
		got, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`p.flash.ok`)))
		step("read the outcome", err)
		if !strings.Contains(got, flash) {
			t.Errorf("after pressing %s: %q, want %q", button, got, flash)
		}
		shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		step("screenshot the outcome", err)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("dashboard-%d-pairing-done.png", size.w)), shot, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	for _, tt := range []struct {
		user string
		want bool
	}{{"42", true}, {"43", false}} {
		if ok, err := s.store.IsApproved(ctx0, "telegram", tt.user); err != nil || ok != tt.want {
			t.Errorf("telegram user %s approved = %v, %v; want %v", tt.user, ok, err, tt.want)
		}
	}
	if list, err := s.store.PendingPairings(ctx0); err != nil || len(list) != 0 {
		t.Errorf("pending after the buttons = %+v, %v; want none", list, err)
	}
}

// checkReadable checks a page of the dashboard at a width: the status of every
// turn in a turn table is on screen without scrolling the table, and the
// usage chart's labels are drawn at least 9 px high, the x labels apart.
func checkReadable(t *testing.T, ctx context.Context, where string, width int64) {
	t.Helper()
	// The right edge of each turn's cell under the "status" heading; -1
	// for a turn table without one.
	status, err := chromedp.Run(ctx, chromedp.Evaluate[[]int](`Array.from(document.querySelectorAll('table.turns')).flatMap(tb => {
		const i = Array.from(tb.rows[0].cells).findIndex(c => c.textContent.trim() === 'status');
		return Array.from(tb.querySelectorAll('tr.turn')).map(r => i < 0 ? -1 : Math.ceil(r.cells[i].getBoundingClientRect().right));
	})`))
	if err != nil {
		t.Fatalf("browser: measure the turn status at %s: %v", where, err)
	}
	for _, right := range status {
		if right < 0 {
			t.Errorf("%s: a turn table has no status column", where)
		}
		if right > int(width) {
			t.Errorf("%s: a turn's status ends at %d px, off screen (%d px wide)", where, right, width)
		}
	}
	labels, err := chromedp.Run(ctx, chromedp.Evaluate[[][]float64](`Array.from(document.querySelectorAll('#usage-chart text'))
		.filter(e => getComputedStyle(e).display !== 'none')
		.map(e => { const r = e.getBoundingClientRect(); return [r.left, r.right, r.height, e.classList.contains('xlabel') ? 1 : 0]; })`))
	if err != nil {
		t.Fatalf("browser: measure the chart's labels at %s: %v", where, err)
	}
	lastRight := -1.0
	for _, l := range labels {
		if l[2] < 9 {
			t.Errorf("%s: a chart label is %.1f px high, want at least 9 to be readable", where, l[2])
		}
		if l[3] == 1 {
			if l[0] < lastRight {
				t.Errorf("%s: the chart's x labels overlap (one starts at %.0f px, the one before ends at %.0f)", where, l[0], lastRight)
			}
			lastRight = l[1]
		}
	}
}

// The web chat in a real browser, signed in with the login form: a
// streamed answer (the send_message text in several chunks) with the
// tool's progress, an approval answered by the Approve button, the turn
// found by the search box by a word of its message, and the logout.
// Screenshots of the conversation at 390 and 1366 px go to the artifact
// directory, each checked for sideways overflow and for the buttons'
// being on screen.
func TestWebChatInBrowser(t *testing.T) {
	chrome := chromium(t)
	var ran atomic.Int32
	s := newStack(t, func(o *Options) { o.Token = testToken }, stackExtras{tools: []*agent.Tool{deleteTool(&ran)}, approvals: true})
	ctx := openBrowser(t, chrome, "about:blank")
	step := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("browser: %s: %v", what, err)
		}
	}
	step("sign in on the way to the web chat", chromedp.Do(ctx,
		chromedp.Navigate(s.url+"/webchat"),
		chromedp.SetValue(chromedp.CSS(`input[name="token"]`), testToken),
		chromedp.Submit(chromedp.CSS(`form`)),
		chromedp.WaitVisible(chromedp.CSS(`#webchat-form[data-ready]`))))
	// say types a message, sends it and waits for the nth answer to end.
	say := func(text string, n int) {
		t.Helper()
		step("say "+text, chromedp.Do(ctx,
			chromedp.SetValue(chromedp.CSS(`#webchat-form textarea`), text),
			chromedp.Click(chromedp.CSS(`#webchat-form button`)),
			chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#webchat-log li.msg.assistant:nth-of-type(%d)[data-done]`, 2*n)))))
	}
	answer := func(n int) (text string, chunks string) {
		t.Helper()
		sel := fmt.Sprintf(`#webchat-log li.msg.assistant:nth-of-type(%d)`, 2*n)
		text, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel+` p.text`)))
		step("read answer", err)
		c, err := chromedp.Run(ctx, chromedp.AttributeValue(chromedp.CSS(sel), "data-chunks"))
		step("read answer's chunks", err)
		return text, c.Value
	}

	// 1. A tool call, then the answer streamed as the model writes it.
	reply := "The time is 12:00 UTC; this answer streams in pieces, as the model writes it."
	args, _ := json.Marshal(map[string]string{"text": reply})
	s.fake.Push(
		testkit.Reply{ToolCalls: []llm.ToolCall{testkit.Call("c1", "current_time", `{}`)}},
		testkit.Reply{ArgPieces: 8, ChunkDelay: 20 * time.Millisecond, ToolCalls: []llm.ToolCall{testkit.Call("c2", "send_message", string(args))}},
		testkit.Reply{Text: "Sent it."},
	)
	say("What time is it, my gardening friend?", 1)
	text, chunks := answer(1)
	if n, _ := strconv.Atoi(chunks); text != reply || n < 2 {
		t.Errorf("the streamed answer: %q in %s chunks; want %q in several", text, chunks, reply)
	}
	tool, err := chromedp.Run(ctx, chromedp.AttributeValue(chromedp.CSS(`#webchat-log li.tool-live[data-tool="current_time"]`), "data-state"))
	step("read the tool's progress", err)
	if tool.Value != "done" {
		t.Errorf("current_time's progress in the page = %q, want done", tool.Value)
	}

	// 2. A tool that needs approval: the question with buttons; Approve.
	s.fake.Push(testkit.Reply{ToolCalls: []llm.ToolCall{testkit.Call("c3", "delete_file", `{"path":"old.txt"}`)}})
	say("delete old.txt", 2)
	step("wait for the approval's buttons", chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`#webchat-log .approval button.approve`))))
	if ran.Load() != 0 {
		t.Fatal("the tool ran before its approval")
	}
	dir := artifactDir(t)
	for _, size := range []struct {
		w, h   int64
		mobile bool
	}{{390, 844, true}, {1366, 768, false}} {
		opts := []chromedp.EmulateViewportOption{chromedp.EmulateLandscape}
		if size.mobile {
			opts = []chromedp.EmulateViewportOption{chromedp.EmulatePortrait, chromedp.EmulateMobile, chromedp.EmulateTouch}
		}
		step("set the viewport", chromedp.Do(ctx, chromedp.EmulateViewport(size.w, size.h, opts...)))
		m, err := chromedp.Run(ctx, chromedp.Evaluate[[]int](`(() => {
			const b = document.querySelector('#webchat-log .approval button.deny').getBoundingClientRect();
			return [document.documentElement.scrollWidth, window.innerWidth, Math.round(b.right)];
		})()`))
		step("measure the web chat", err)
		if len(m) != 3 || m[1] != int(size.w) || m[0] > m[1] || m[2] > m[1] {
			t.Errorf("the web chat at %d px: scrollWidth, innerWidth, Deny's right edge = %v; want all within %d", size.w, m, size.w)
		}
		shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		step("screenshot the web chat", err)
		path := filepath.Join(dir, fmt.Sprintf("dashboard-%d-webchat.png", size.w))
		if err := os.WriteFile(path, shot, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s", path)
	}
	step("restore the viewport", chromedp.Do(ctx, chromedp.EmulateViewport(1280, 1400)))
	s.fake.Push(testkit.Reply{Text: "Deleted old.txt."})
	step("press Approve", chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`#webchat-log .approval button.approve`)),
		chromedp.WaitVisible(chromedp.CSS(`#webchat-log li.msg.assistant:nth-of-type(6)[data-done]`))))
	if text, _ := answer(3); text != "Deleted old.txt." || ran.Load() != 1 {
		t.Errorf("after Approve: %q, the tool ran %d times; want the resumed turn's answer and one run", text, ran.Load())
	}
	user, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`#webchat-log li.msg.user:nth-of-type(5)`)))
	step("read the button's message", err)
	if user != "yes" {
		t.Errorf("the Approve button sent %q, want yes", user)
	}

	// 3. The search box finds the first turn by a word of its message.
	turns, err := s.store.SearchTurns(t.Context(), "time is it", 10)
	if err != nil || len(turns) != 1 {
		t.Fatalf("the first turn in the store: %v, %v", turns, err)
	}
	step("search", chromedp.Do(ctx,
		chromedp.SetValue(chromedp.CSS(`header form.search input[name="q"]`), "gardening"),
		chromedp.Submit(chromedp.CSS(`header form.search`)),
		chromedp.WaitVisible(chromedp.CSS(`#search h1`))))
	found, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](
		`Array.from(document.querySelectorAll('#found-turns tr.turn')).map(r => r.getAttribute('data-turn'))`))
	step("read the results", err)
	if len(found) != 1 || found[0] != strconv.FormatInt(turns[0].ID, 10) {
		t.Errorf("search for gardening found turns %v, want [%d]", found, turns[0].ID)
	}

	// 4. Sign out: the sign-in form again, and the dashboard stays shut.
	step("sign out", chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`header form.logout button`)),
		chromedp.WaitVisible(chromedp.CSS(`#signed-out`))))
	resp, err := chromedp.RunResponse(ctx, chromedp.Navigate(s.url+"/webchat"))
	step("open the web chat after signing out", err)
	if resp.Status != http.StatusUnauthorized {
		t.Errorf("the web chat after signing out: %d, want 401 (the sign-in form)", resp.Status)
	}
}

// Revoking a paired user in a real browser: a stranger on a channel with
// pairing gets a code, the operator approves it (as `switchboard pairing
// approve` does) and the agent answers them; on the pairing page Chromium
// presses their Revoke button (the page's CSRF form); the list no longer
// shows them, and their next message is refused by the router: a new
// pairing code, and no call to the model.
func TestRevokeInBrowser(t *testing.T) {
	chrome := chromium(t)
	s := newStack(t, func(o *Options) { o.Token = testToken })
	ch := chatfake.NewChannel()
	s.router.AddChannel(ch, router.Access{Pairing: true})
	// say delivers a message from user 42 and returns what the router sent
	// back first.
	say := func(text string) string {
		t.Helper()
		if err := s.router.Deliver(t.Context(), chatfake.Msg("dm-42", "42", text)); err != nil {
			t.Fatalf("deliver %q: %v", text, err)
		}
		select {
		case <-ch.Notify:
		case <-time.After(10 * time.Second):
			t.Fatalf("no reply to %q (sent %q)", text, ch.Texts())
		}
		sent := ch.Texts()
		return sent[len(sent)-1]
	}
	pairingCode := func(reply string) string {
		t.Helper()
		_, after, ok := strings.Cut(reply, "pairing code is ")
		if !ok {
			t.Fatalf("reply %q gives no pairing code", reply)
		}
		return strings.Fields(after)[0]
	}
	code := pairingCode(say("hello"))
	if _, err := s.store.ApprovePairing(t.Context(), code); err != nil {
		t.Fatal(err)
	}
	s.fake.Push(testkit.Reply{Text: "Hello, Ada."})
	if got := say("are you there?"); got != "Hello, Ada." {
		t.Fatalf("the paired user's message was answered %q, want the agent's answer", got)
	}

	ctx := openBrowser(t, chrome, "about:blank")
	step := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("browser: %s: %v", what, err)
		}
	}
	row := `#paired li.paired[data-user="fake:42"]`
	step("sign in on the way to the pairing page", chromedp.Do(ctx,
		chromedp.Navigate(s.url+"/pairing"),
		chromedp.SetValue(chromedp.CSS(`input[name="token"]`), testToken),
		chromedp.Submit(chromedp.CSS(`form`)),
		chromedp.WaitVisible(chromedp.CSS(row))))
	step("press Revoke", chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(row+` form.revoke button`)),
		chromedp.WaitVisible(chromedp.CSS(`#pairing p.flash`))))
	flash, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`#pairing p.flash`)))
	step("read the flash", err)
	listed, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](
		`Array.from(document.querySelectorAll('#paired li.paired')).map(li => li.dataset.user)`))
	step("read the paired users", err)
	if !strings.Contains(flash, "Revoked fake user 42") || len(listed) != 0 {
		t.Errorf("after Revoke: flash %q, paired users listed %q; want the revoke confirmed and nobody listed", flash, listed)
	}

	calls := s.fake.Calls()
	if got := say("still there?"); pairingCode(got) == code {
		t.Errorf("the revoked user got the old code again: %q", got)
	}
	if n := s.fake.Calls(); n != calls {
		t.Errorf("the revoked user's message reached the model (%d calls, want %d)", n, calls)
	}
}
