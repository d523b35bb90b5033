package testkit

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/llm"
)

// The helpers below drive the OpenAI-compatible chat API (channels/chatapi)
// from the tests of the packages that serve it: the channel's own and the
// HTTP server's.

// HTTPDo sends a request to base+path with a bearer token (if any) and a
// JSON content type (if there is a body), plus header, and returns the
// status and the body.
func HTTPDo(t testing.TB, base, token, method, path, body string, header map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// Chat posts a non-streaming chat completion for user to base and returns
// the reply text and the whole answer.
func Chat(t testing.TB, base, token, user, text string) (string, map[string]any) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"model": "switchboard", "user": user,
		"messages": []map[string]any{{"role": "system", "content": "ignored"}, {"role": "user", "content": text}}})
	code, out := HTTPDo(t, base, token, "POST", "/v1/chat/completions", string(body), nil)
	if code != http.StatusOK {
		t.Fatalf("chat %q: status %d: %s", text, code, out)
	}
	var resp map[string]any
	if err := json.Unmarshal([]byte(out), &resp); err != nil {
		t.Fatalf("chat %q: %v: %s", text, err, out)
	}
	choice := resp["choices"].([]any)[0].(map[string]any)
	return choice["message"].(map[string]any)["content"].(string), resp
}

// ScriptToolTurn queues on fake a turn that calls current_time, then
// answers, with usage on both replies.
func ScriptToolTurn(fake *FakeLLM, answer string) {
	fake.Push(
		Reply{ToolCalls: []llm.ToolCall{Call("c1", "current_time", `{}`)},
			Usage: &llm.Usage{PromptTokens: 120, CompletionTokens: 8, TotalTokens: 128}},
		Reply{Text: answer, Usage: &llm.Usage{PromptTokens: 150, CompletionTokens: 12, TotalTokens: 162}},
	)
}

// NodeClient runs the official openai npm client's script client.mjs in
// dir against the chat API at baseURL (…/v1) with token, and returns what
// it printed. It installs the package with npm ci first if it is missing
// (one install at a time: tests of several packages share dir); a missing
// Node.js or npm is reported with Missing.
func NodeClient(t testing.TB, dir, baseURL, token string) []byte {
	t.Helper()
	return NodeScript(t, dir, "client.mjs", baseURL, token)
}

// NodeScript is NodeClient with another script of dir.
func NodeScript(t testing.TB, dir, script, baseURL, token string) []byte {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		Missing(t, "node is not installed; the official openai client runs on Node.js")
	}
	dir, err = filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	installNodeClient(t, dir)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "SB_BASE_URL="+baseURL, "SB_TOKEN="+token)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node %s: %v\nstdout: %s\nstderr: %s", script, err, out, stderr.String())
	}
	return out
}

// installNodeClient runs npm ci in dir unless the openai package is there,
// holding a lock on dir so that concurrent test binaries install once.
func installNodeClient(t testing.TB, dir string) {
	t.Helper()
	installed := filepath.Join(dir, "node_modules", "openai", "package.json")
	if _, err := os.Stat(installed); err == nil {
		return
	}
	lock, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if _, err := os.Stat(installed); err == nil {
		return // installed while this one waited
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		Missing(t, "npm is not installed, and the openai package is not in %s/node_modules", dir)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		Missing(t, "npm ci in %s failed: %v\n%s", dir, err, out)
	}
}
