package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchboard-gateway/switchboard/internal/testkit"
)

// TestSecondServeOnOneStore (issue 31, finding 3): a second `serve` on the
// SQLite store of a running one, here with its own http.listen, exits at
// once and non-zero naming the first (pid, host, start) and the fix; the
// first keeps serving. After the first is killed, a new one starts on the
// store at once (the kernel dropped the lock).
func TestSecondServeOnOneStore(t *testing.T) {
	fake := testkit.NewFakeLLM(t)
	fake.SetDefault(&testkit.Reply{Text: "still here"})
	dbPath := filepath.Join(t.TempDir(), "switchboard.db")
	readyAt := func(addr string) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			_, err := waitReadyzAt(ctx, addr, func(rd replicaReadiness) bool { return rd.code == http.StatusOK })
			return err
		}
	}
	cfg1, addr1 := apiConfigOn(t, fake, dbPath)
	r := newChildRig(t, fake, cfg1)
	first := r.start(t)
	if err := readyAt(addr1)(waitCtx(t)); err != nil {
		t.Fatalf("the first serve: %v; stderr:\n%s", err, first.stderr.String())
	}

	cfg2, addr2 := apiConfigOn(t, fake, dbPath)
	r.cfg = cfg2
	second := r.start(t)
	select {
	case <-second.done:
	case <-waitCtx(t).Done():
		t.Fatalf("the second serve on the store is still running; stderr:\n%s", second.stderr.String())
	}
	if code := second.cmd.ProcessState.ExitCode(); code != exitFail {
		t.Errorf("the second serve exited %d, want %d", code, exitFail)
	}
	host, _ := os.Hostname()
	log := second.stderr.String()
	for _, want := range []string{fmt.Sprintf("pid %d", first.cmd.Process.Pid), "host " + host, "started 20",
		"stop that process", "store.path", dbPath} {
		if !strings.Contains(log, want) {
			t.Errorf("the second serve's message does not say %q:\n%s", want, log)
		}
	}
	if resp, err := http.Get("http://" + addr2 + "/readyz"); err == nil {
		resp.Body.Close()
		t.Errorf("the second serve answered on %s", addr2)
	}

	// The first keeps serving.
	body := strings.NewReader(`{"model":"switchboard","user":"ada","messages":[{"role":"user","content":"hi"}]}`)
	resp, err := http.Post("http://"+addr1+"/v1/chat/completions", "application/json", body)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("the first serve answered %d after the second tried", resp.StatusCode)
	}

	// A crash leaves the lock file but not the lock: the next one starts.
	first.crash(t)
	third := r.start(t)
	if err := readyAt(addr2)(waitCtx(t)); err != nil {
		t.Fatalf("serve after the holder was killed: %v; stderr:\n%s", err, third.stderr.String())
	}
	third.stop(t)
}
