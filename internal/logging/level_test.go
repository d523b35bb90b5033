package logging

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

func TestLeveledLoggerFollowsItsLevel(t *testing.T) {
	var buf bytes.Buffer
	var lv slog.LevelVar
	lv.Set(slog.LevelWarn)
	log, err := NewLeveled(&buf, &lv, "json", []string{"hunter2-secret"})
	if err != nil {
		t.Fatal(err)
	}
	log.Info("hidden")
	debug, err := ParseLevel("debug")
	if err != nil {
		t.Fatal(err)
	}
	lv.Set(debug)
	log.Debug("shown", "token", "hunter2-secret")
	out := buf.String()
	if strings.Contains(out, "hidden") || !strings.Contains(out, "shown") {
		t.Fatalf("level not followed:\n%s", out)
	}
	if strings.Contains(out, "hunter2-secret") {
		t.Fatalf("secret leaked:\n%s", out)
	}
	if _, err := ParseLevel("loud"); err == nil {
		t.Fatal("ParseLevel accepted \"loud\"")
	}
}
