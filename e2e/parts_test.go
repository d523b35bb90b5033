package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/channels/discord"
	"github.com/switchboard-gateway/switchboard/channels/telegram"
	"github.com/switchboard-gateway/switchboard/channels/whatsapp"
	"github.com/switchboard-gateway/switchboard/config"
	"github.com/switchboard-gateway/switchboard/internal/discordfake"
	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/internal/testkit/cfgfile"
	"github.com/switchboard-gateway/switchboard/internal/tgfake"
	"github.com/switchboard-gateway/switchboard/internal/wafake"
)

// holdNet forwards requests to a fake platform, except the nth request
// that send matches: that one never reaches the platform, and waits until
// the client goes away (a killed child) or the test ends. It is the moment
// between two parts of a reply: the earlier parts were accepted, the next
// is on its way.
type holdNet struct {
	URL  string
	send func(*http.Request) bool

	mu      sync.Mutex
	seen    int
	holdAt  int
	held    chan struct{} // closed when the request is held
	release chan struct{} // closed when the test ends
}

func newHoldNet(t *testing.T, target string, send func(*http.Request) bool, holdAt int) *holdNet {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(u)
	// A long poll ends with a cancelled request when a child dies: no log.
	proxy.ErrorHandler = func(w http.ResponseWriter, _ *http.Request, _ error) { w.WriteHeader(http.StatusBadGateway) }
	n := &holdNet{send: send, holdAt: holdAt, held: make(chan struct{}), release: make(chan struct{})}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.hold(r) {
			close(n.held)
			select {
			case <-r.Context().Done():
			case <-n.release:
			}
			panic(http.ErrAbortHandler) // no answer
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(n.release) }) // runs before srv.Close
	n.URL = srv.URL
	return n
}

func (n *holdNet) hold(r *http.Request) bool {
	if !n.send(r) {
		return false
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.seen++
	return n.seen == n.holdAt
}

// waitHeld waits until the request to hold arrived.
func (n *holdNet) waitHeld(t *testing.T) {
	t.Helper()
	select {
	case <-n.held:
	case <-waitCtx(t).Done():
		t.Fatal("the request to hold never came")
	}
}

// paragraphs is prose in numbered paragraphs, about size characters long.
func paragraphs(size int) string {
	var b strings.Builder
	for i := 1; b.Len() < size; i++ {
		fmt.Fprintf(&b, "Paragraph %d. A long answer is split into parts that each fit one message; after a crash between them, only the parts not yet sent go out.\n\n", i)
	}
	return strings.TrimSpace(b.String())
}

// TestCrashBetweenParts kills serve while the third part of a three-part
// reply is on its way, after the platform accepted the first two, and
// restarts it on the same database: the resumed turn sends only the third
// part, on Telegram (which has no idempotency key) as on Discord (where a
// nonce would hide a resent part in the messages, but not in the requests).
func TestCrashBetweenParts(t *testing.T) {
	t.Run("telegram", func(t *testing.T) {
		tg, model := tgfake.New(t, tgToken), testkit.NewFakeLLM(t)
		hold := newHoldNet(t, tg.URL, func(r *http.Request) bool {
			return strings.HasSuffix(r.URL.Path, "/sendMessage")
		}, 3)
		// Previews off: a preview under load would be one more message
		// and move the kill off the third part; this test is about parts.
		r := newChildRig(t, model, telegramConfig(t, hold.URL, model, 30*time.Second, func(tg *telegram.Config) {
			tg.AllowUsers, tg.StreamPreview = userIDs(tgAlice), false
		}))
		r.tg = tg
		reply := paragraphs(10500) // three parts of at most 4,000
		model.Push(testkit.Reply{Text: reply})
		tg.PushText(tgAlice, tgAlice, "alice", "Tell me everything.")

		c1 := r.start(t)
		hold.waitHeld(t)
		if got := len(tg.Sent()); got != 2 {
			t.Fatalf("before the kill the bot sent %d parts, want 2", got)
		}
		c1.crash(t)

		c2 := r.start(t)
		sent := r.waitSent(t, tgAlice, 3)
		c2.stop(t)
		reqs := tg.Requests("sendMessage")
		texts := make([]string, len(reqs))
		for i, p := range reqs {
			texts[i] = p.Get("text")
		}
		if len(reqs) != 3 || len(slices.Compact(slices.Clone(texts))) != 3 {
			t.Errorf("Telegram got %d sendMessage calls, want one for each of the 3 parts: %.60q", len(reqs), texts)
		}
		if len(sent) != 3 || len(tg.Sent()) != 3 {
			t.Errorf("the bot sent %d messages, want the 3 parts once: %.60q", len(tg.Sent()), sentTexts(tg.Sent()))
		}
		if got := model.Calls(); got != 1 {
			t.Errorf("model calls = %d, want 1 (the resumed turn delivers the stored answer)", got)
		}
		if l := c2.stderr.String(); !strings.Contains(l, "completing a reply cut off after a restart") {
			t.Errorf("the restarted serve did not complete the reply:\n%s", l)
		}
	})

	t.Run("discord", func(t *testing.T) {
		dc, model := discordfake.New(t), testkit.NewFakeLLM(t)
		sendPath := regexp.MustCompile(`^/api/v9/channels/\d+/messages$`)
		hold := newHoldNet(t, dc.URL, func(r *http.Request) bool {
			return r.Method == http.MethodPost && sendPath.MatchString(r.URL.Path)
		}, 3)
		c := modelConfig(model.URL)
		c.Store.Path = filepath.Join(t.TempDir(), "switchboard.db")
		c.Learning.Enabled = false
		c.HTTP.Listen = ""
		c.Log.Level = "debug"
		d := config.Section[*discord.Config](c)
		d.Enabled, d.Token, d.APIBase, d.GatewayURL = true, dc.Token, hold.URL+"/api/v9", dc.GatewayURL()
		d.AllowUsers = []string{aliceID}
		d.StreamPreview = false // as for Telegram above
		r := newChildRig(t, model, cfgfile.Write(t, c))
		dm := dc.NewID()
		dc.AddChannel(dm, discordfake.ChannelTypeDM, "", "")
		reply := paragraphs(5000) // three parts of at most 1,900
		model.Push(testkit.Reply{Text: reply})

		c1 := r.start(t)
		if err := dc.WaitFor(waitCtx(t), func() bool { return dc.Identifies() >= 1 }); err != nil {
			t.Fatal(err)
		}
		dc.Dispatch("MESSAGE_CREATE", dc.MessageCreate(dm, "", aliceID, "alice", "Tell me everything."))
		hold.waitHeld(t)
		if got := len(dc.SentTo(dm)); got != 2 {
			t.Fatalf("before the kill the bot sent %d parts, want 2", got)
		}
		c1.crash(t)

		c2 := r.start(t)
		if err := dc.WaitFor(waitCtx(t), func() bool { return len(dc.SentTo(dm)) >= 3 }); err != nil {
			t.Fatalf("want 3 parts, have %d: %v", len(dc.SentTo(dm)), err)
		}
		c2.stop(t)
		sent := dc.SentTo(dm)
		if got := contents(sent); len(got) != 3 || len(slices.Compact(slices.Clone(got))) != 3 {
			t.Errorf("the bot sent %d messages, want the 3 parts once: %.60q", len(got), got)
		}
		if got := dc.Requests(discordfake.RouteCreateMessage); got != 3 {
			t.Errorf("Discord got %d message posts, want 3 (one per part; the restart sends only the third)", got)
		}
		if got := model.Calls(); got != 1 {
			t.Errorf("model calls = %d, want 1 (the resumed turn delivers the stored answer)", got)
		}
		if l := c2.stderr.String(); !strings.Contains(l, "completing a reply cut off after a restart") {
			t.Errorf("the restarted serve did not complete the reply:\n%s", l)
		}
	})

	// WhatsApp's parts are cut by channels/textsplit (UTF-16 units), as
	// Matrix's are (TestMatrixCrashBetweenParts).
	t.Run("whatsapp", func(t *testing.T) {
		wa, model := wafake.New(t), testkit.NewFakeLLM(t)
		hold := newHoldNet(t, wa.APIBase(), func(r *http.Request) bool {
			if r.Method != http.MethodPost || path.Base(r.URL.Path) != "messages" {
				return false
			}
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			var read struct {
				Status string `json:"status"`
			}
			return json.Unmarshal(body, &read) == nil && read.Status == "" // a send, not a read receipt
		}, 3)
		c := modelConfig(model.URL)
		c.Store.Path = filepath.Join(t.TempDir(), "switchboard.db")
		c.Learning.Enabled = false
		c.HTTP.Listen = freeLoopbackAddr(t)
		c.Log.Level = "debug"
		const ann = "15553000001"
		w := config.Section[*whatsapp.Config](c)
		w.Enabled, w.PhoneNumberID, w.APIBase = true, wafake.PhoneNumberID, hold.URL
		w.AccessToken, w.AppSecret, w.VerifyToken = wafake.AccessToken, wafake.AppSecret, wafake.VerifyToken
		w.AllowUsers = []string{ann}
		wa.SetWebhook("http://" + c.HTTP.Listen + whatsapp.DefaultWebhookPath)
		r := newChildRig(t, model, cfgfile.Write(t, c))
		reply := paragraphs(10000) // three parts of at most 4,096 units
		model.Push(testkit.Reply{Text: reply})
		if _, err := wa.Say(wafake.UserMessage{From: ann, Text: "Tell me everything."}); err != nil {
			t.Fatal(err)
		}

		c1 := r.start(t)
		hold.waitHeld(t)
		if got := len(wa.Sent(ann)); got != 2 {
			t.Fatalf("before the kill the bot sent %d parts, want 2", got)
		}
		c1.crash(t)

		c2 := r.start(t)
		if err := wa.WaitFor(waitCtx(t), func() bool { return len(wa.Sent(ann)) >= 3 }); err != nil {
			t.Fatalf("want 3 parts, have %d: %v", len(wa.Sent(ann)), err)
		}
		c2.stop(t)
		var got []string
		for _, m := range wa.Sent(ann) {
			got = append(got, m.Text)
		}
		if len(got) != 3 || len(slices.Compact(slices.Clone(got))) != 3 {
			t.Errorf("the bot sent %d messages, want the 3 parts once: %.60q", len(got), got)
		}
		if got := model.Calls(); got != 1 {
			t.Errorf("model calls = %d, want 1 (the resumed turn delivers the stored answer)", got)
		}
		if l := c2.stderr.String(); !strings.Contains(l, "completing a reply cut off after a restart") {
			t.Errorf("the restarted serve did not complete the reply:\n%s", l)
		}
	})
}
