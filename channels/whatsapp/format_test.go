package whatsapp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/internal/waitfor"
)

func TestRender(t *testing.T) {
	for _, tc := range []struct{ md, want string }{
		{"**bold** and __also__", "*bold* and *also*"},
		{"*italic* and _italic_", "_italic_ and _italic_"},
		{"***both***", "*_both_*"},
		{"~~gone~~", "~gone~"},
		{"# Title\n## **Sub** title", "*Title*\n*Sub title*"},
		{"* one\n+ two\n  - nested", "- one\n- two\n  - nested"},
		{"1. first\n2. second", "1. first\n2. second"},
		{"> quoted **text**", "> quoted *text*"},
		{"see [the docs](https://x.example/d) or https://y.example", "see the docs (https://x.example/d) or https://y.example"},
		{"[https://x.example](https://x.example)", "https://x.example"},
		{"`**not bold**` but **bold**", "`**not bold**` but *bold*"},
		{"```go\nfunc **x**() {}\n```\nafter **b**", "```\nfunc **x**() {}\n```\nafter *b*"},
		{"```\nunclosed *code*", "```\nunclosed *code*\n```"},
		{"a * b * c and 2*3*4", "a * b * c and 2*3*4"},
		{"---", "———"},
		{"snake_case_name stays", "snake_case_name stays"},
	} {
		if got := Render(tc.md); got != tc.want {
			t.Errorf("Render(%q)\n got %q\nwant %q", tc.md, got, tc.want)
		}
	}
}

func TestRetryWait(t *testing.T) {
	for _, tc := range []struct {
		err            error
		limited, again bool
		wait           time.Duration
	}{
		{&APIError{Status: 400, Code: codeReEngagement}, false, false, 0},
		{&APIError{Status: 400, Code: 368}, false, false, 0},
		{&APIError{Status: 401, Code: codeToken}, false, false, 0},
		{&APIError{Status: 400, Code: 100}, false, false, 0},
		{&APIError{Status: 400, Code: codeThroughput}, true, true, time.Second},
		{&APIError{Status: 400, Code: codePairRate, RetryAfter: 7 * time.Second}, true, true, 7 * time.Second},
		{&APIError{Status: 429}, true, true, time.Second},
		{&APIError{Status: 400, Code: codeAppRateBiz}, true, true, time.Second},
		{&APIError{Status: 500, Code: codeGeneric}, false, true, time.Second},
		{&APIError{Status: 503}, false, true, time.Second},
		{&APIError{Status: 400, Code: codeServiceDown}, false, true, time.Second},
		{&net.OpError{Op: "dial", Err: errors.New("connection refused")}, false, true, time.Second},
		{errors.New("read: connection reset by peer"), false, true, time.Second},
		{context.Canceled, false, false, 0},
		{errors.New("decode answer: bad json"), false, false, time.Second},
	} {
		wait, limited, again := retryWait(tc.err, time.Second)
		if limited != tc.limited || again != tc.again || (again && wait != tc.wait) {
			t.Errorf("retryWait(%v) = %v, %v, %v; want %v, %v, %v", tc.err, wait, limited, again, tc.wait, tc.limited, tc.again)
		}
	}
}

// recorded is a Parts that says part 0 was sent as "wamid.old".
type recorded struct{ confirmed []string }

func (r *recorded) Sent(i int) (string, bool) {
	if i == 0 {
		return "wamid.old", true
	}
	return "", false
}

func (r *recorded) Confirmed(_ context.Context, i int, id string) {
	r.confirmed = append(r.confirmed, fmt.Sprint(i, "=", id))
}

// TestSendSkipsPartsSentBefore: a reply a crash cut off is completed,
// not sent again; a rate limit's Retry-After is waited out.
func TestSendSkipsPartsSentBefore(t *testing.T) {
	g := newGraph(t)
	var waits []time.Duration
	a, _ := newTestAdapter(t, g, func(o *Options) {
		o.Sleep = func(ctx context.Context, d time.Duration) error { waits = append(waits, d); return ctx.Err() }
	})
	a.sawMessage(testUser, "wamid.in", time.Now())
	g.failNext(testPhoneID+"/messages", answer{status: 429, code: codeThroughput, retryAfter: "3"})
	parts := &recorded{}
	text := strings.Repeat("x", 3000) + "\n\n" + strings.Repeat("y", 3000)
	id, err := a.Send(t.Context(), channels.Outbound{ChatID: testUser, Text: text, Parts: parts})
	if err != nil {
		t.Fatal(err)
	}
	texts := g.messages("text")
	if len(texts) != 2 { // the 429 and its retry
		t.Fatalf("%d text sends; want the second part twice (a 429, then sent)", len(texts))
	}
	for _, b := range texts {
		if body := b["text"].(map[string]any)["body"].(string); !strings.HasPrefix(body, "yyy") {
			t.Errorf("sent %q…; want only the second part", body[:5])
		}
	}
	if len(parts.confirmed) != 1 || !strings.HasPrefix(parts.confirmed[0], "1=wamid.") || !strings.HasSuffix(parts.confirmed[0], id) {
		t.Errorf("confirmed %v, returned %s", parts.confirmed, id)
	}
	if len(waits) != 1 || waits[0] != 3*time.Second {
		t.Errorf("waited %v; want Retry-After's 3 s", waits)
	}
	g.waitReads(t, 1) // the user's message is marked read after the reply
}

// TestSendDoesNotWaitForTheReadReceipt: a Graph API slow to take the read
// receipt does not hold up Send; the receipt goes out when it answers.
func TestSendDoesNotWaitForTheReadReceipt(t *testing.T) {
	g := newGraph(t)
	g.holdReads = make(chan struct{})
	a, _ := newTestAdapter(t, g, nil)
	a.sawMessage(testUser, "wamid.in", time.Now())
	sent := make(chan error, 1)
	go func() {
		_, err := a.Send(t.Context(), channels.Outbound{ChatID: testUser, Text: "hello"})
		sent <- err
	}()
	select {
	case err := <-sent:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(3 * time.Second): // markRead's own limit is 5 s
		close(g.holdReads)
		t.Fatal("Send waited for the read receipt")
	}
	if a.unread(testUser) != "wamid.in" {
		t.Error("the message is marked read before the Graph API answered")
	}
	close(g.holdReads)
	g.waitReads(t, 1)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := waitfor.Poll(ctx, time.Millisecond, func() bool { return a.unread(testUser) == "" }); err != nil {
		t.Errorf("the read receipt was not recorded: %v", err)
	}
}
