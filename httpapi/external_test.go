package httpapi

// A test that drives the dashboard in a real browser: headless Chromium
// (Debian's chromium package) through chromedp. It is installed by .ci/run;
// under CI=true a missing browser fails the test, elsewhere it skips it
// with a message saying what to install (testkit.Missing). The chat API's
// test with the official openai npm client is in channels/openai.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"switchboard/internal/testkit"
	"switchboard/llm"
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
	actx, cancelAlloc := chromedp.NewExecAllocator(t.Context(), opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()
	// The first call starts the browser, which lives as long as its context:
	// no timeout on that one (see chromedp.Run); the steps after it have one.
	if err := chromedp.Do(bctx, chromedp.Navigate(s.url+"/")); err != nil {
		t.Fatalf("browser: open the dashboard: %v", err)
	}
	ctx, cancel := context.WithTimeout(bctx, 60*time.Second)
	defer cancel()
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
