package testkit

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

// CutStream sends the text, then drops the connection: the body ends
// early, without a finish reason or [DONE].
func TestCutStream(t *testing.T) {
	f := NewFakeLLM(t)
	f.Push(Reply{TextChunks: []string{"half ", "an answer"}, CutStream: true})
	resp, err := http.Post(f.URL+"/chat/completions", "application/json",
		strings.NewReader(`{"model":"fake-model","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("reading the body: %v, want an unexpected EOF", err)
	}
	got := string(body)
	if !strings.Contains(got, `"content":"an answer"`) || strings.Contains(got, "finish_reason\":\"") || strings.Contains(got, "[DONE]") {
		t.Errorf("body = %q, want the text without a finish reason or [DONE]", got)
	}
}
