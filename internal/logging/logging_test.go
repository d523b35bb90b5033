package logging

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func TestRedactsSecretsEverywhere(t *testing.T) {
	const token = "123456:ABC-secret-token"
	for _, format := range []string{"text", "json"} {
		t.Run(format, func(t *testing.T) {
			var buf bytes.Buffer
			log, err := New(&buf, "debug", format, []string{token, "ab"})
			if err != nil {
				t.Fatal(err)
			}
			log = log.With("base", "https://api.telegram.org/bot"+token+"/getMe")
			log.Error("poll failed for bot"+token,
				"err", errors.New(`Post "http://127.0.0.1:1/bot`+token+`/getUpdates": context canceled`),
				"nested", map[string]string{"t": token})
			out := buf.String()
			if strings.Contains(out, token) {
				t.Fatalf("secret leaked: %s", out)
			}
			if got := strings.Count(out, "[redacted]"); got != 4 {
				t.Fatalf("got %d redactions, want 4: %s", got, out)
			}
			if !strings.Contains(out, "context canceled") {
				t.Fatalf("error text lost: %s", out)
			}
		})
	}
}

func TestRejectsUnknownLevelAndFormat(t *testing.T) {
	if _, err := New(&bytes.Buffer{}, "loud", "text", nil); err == nil || !strings.Contains(err.Error(), "loud") {
		t.Fatalf("level error = %v", err)
	}
	if _, err := New(&bytes.Buffer{}, "info", "xml", nil); err == nil || !strings.Contains(err.Error(), "xml") {
		t.Fatalf("format error = %v", err)
	}
}
