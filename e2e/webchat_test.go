package e2e

// The dashboard's web chat through serve: signed in with the login form, a
// message posted as the page's script posts it streams back the agent's
// answer with the tool's progress, in a chat of the operator's own; after
// the sign-out the same cookie talks no more.

import (
	"bufio"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/switchboard-gateway/switchboard/internal/testkit"
)

var csrfField = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

func TestWebChatThroughServe(t *testing.T) {
	const token = "web-chat-token-FAKE-0123456789abcdef"
	model := testkit.NewFakeLLM(t)
	_, base := serveReady(t, httpConfig(t, model.URL, token), token)

	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Jar: jar}
	// get returns a page's status, body and CSRF token.
	get := func(path string) (int, string, string) {
		t.Helper()
		resp, err := client.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		m := csrfField.FindStringSubmatch(string(b))
		if m == nil {
			return resp.StatusCode, string(b), ""
		}
		return resp.StatusCode, string(b), m[1]
	}
	post := func(path, contentType, body string, header map[string]string) *http.Response {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", contentType)
		req.Header.Set("Origin", base)
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}

	_, _, csrf := get("/webchat") // the sign-in form
	resp := post("/login", "application/x-www-form-urlencoded", url.Values{"token": {token}, "csrf": {csrf}, "next": {"/webchat"}}.Encode(), nil)
	resp.Body.Close()
	code, page, csrf := get("/webchat")
	if code != http.StatusOK || !strings.Contains(page, `id="webchat-form"`) || csrf == "" {
		t.Fatalf("the web chat after signing in: %d\n%s", code, page)
	}

	testkit.ScriptToolTurn(model, "It is tea time.")
	resp = post("/webchat/messages", "application/json", `{"text":"What time is it?"}`, map[string]string{"X-Switchboard-CSRF": csrf})
	var content, progress strings.Builder
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.Contains(line, `"switchboard_progress"`) {
			progress.WriteString(line)
		}
		if i := strings.Index(line, `"content":"`); i >= 0 {
			rest := line[i+len(`"content":"`):]
			content.WriteString(rest[:strings.Index(rest, `"`)])
		}
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || content.String() != "It is tea time." ||
		!strings.Contains(progress.String(), `"state":"running"`) || !strings.Contains(progress.String(), `"state":"done"`) {
		t.Fatalf("the web chat's answer: %d, content %q, progress %s", resp.StatusCode, content.String(), progress.String())
	}
	if _, chats, _ := get("/chats"); !strings.Contains(chats, "dashboard-") {
		t.Errorf("the chats page lacks the operator's chat:\n%s", chats)
	}

	resp = post("/logout", "application/x-www-form-urlencoded", url.Values{"csrf": {csrf}}.Encode(), nil)
	resp.Body.Close()
	if code, _, _ := get("/webchat"); code != http.StatusUnauthorized {
		t.Errorf("the web chat after signing out: %d, want 401", code)
	}
}
