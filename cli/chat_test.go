package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchboard-gateway/switchboard/config"
	"github.com/switchboard-gateway/switchboard/gateway"
	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/llm"
)

// chatRun is one `switchboard chat` session that ended at end of input.
type chatRun struct {
	code             int
	stdout, stderr   string
	log              string // the chat's log file
	logPath, storeDB string
}

// runChat runs `switchboard chat` with args on a model at url, the lines
// as input, until the input ends and the last message is answered.
func runChat(t *testing.T, url string, more func(*config.Config), input string, args ...string) chatRun {
	t.Helper()
	dir := t.TempDir()
	db := filepath.Join(dir, "state", "switchboard.db")
	cfgPath := storeConfig(t, db, func(c *config.Config) {
		c.LLM.BaseURL, c.LLM.APIKey, c.LLM.Model, c.LLM.MaxRetries = url, "sk-test", "fake-model", 1
		c.Skills.Dir = filepath.Join(dir, "skills")
		if more != nil {
			more(c)
		}
	})
	var out, errb testkit.SyncBuffer
	code := RunWith(t.Context(), "dev", append([]string{"chat", "--config", cfgPath}, args...),
		Stdio{In: strings.NewReader(input), Out: &out, Err: &errb}, gateway.Options{})
	r := chatRun{code: code, stdout: out.String(), stderr: errb.String(), storeDB: db,
		logPath: filepath.Join(filepath.Dir(db), chatLogName)}
	if b, err := os.ReadFile(r.logPath); err == nil {
		r.log = string(b)
	}
	return r
}

// botLines are the replies the chat printed.
func botLines(stdout string) []string {
	var out []string
	for _, l := range strings.Split(stdout, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimPrefix(l, "\r"), "bot> "); ok {
			out = append(out, rest)
		}
	}
	return out
}

// logLine matches what slog's handlers print.
func hasLogLine(s string) bool {
	return strings.Contains(s, "level=") || strings.Contains(s, `"level":`)
}

// errorChain finds the marks of a Go error chain in a text meant for a
// chat user: a package prefix, a wrapped HTTP error.
func errorChain(s string) string {
	for _, mark := range []string{"agent:", "llm:", "plans:", "router:", "store:", "openai", "status code", "error,", ": %!", "<nil>"} {
		if strings.Contains(s, mark) {
			return mark
		}
	}
	return ""
}

// A model that fails: the terminal shows the conversation and one plain
// sentence, no log line (they go to the log file, next to the store), and
// --verbose prints them.
func TestChatModelErrorPrintsNoLogLine(t *testing.T) {
	fake := testkit.NewFakeLLM(t)
	fake.SetDefault(&testkit.Reply{Status: 500})

	r := runChat(t, fake.URL, nil, "hello?\n")
	if r.code != ExitOK {
		t.Fatalf("exit code %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if hasLogLine(r.stdout) || r.stderr != "" {
		t.Errorf("log lines in the terminal:\nstdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	}
	want := "Sorry, I couldn't reach the language model just now (HTTP 500). Please try again in a moment."
	if got := botLines(r.stdout); len(got) != 1 || got[0] != want {
		t.Errorf("replies = %q, want [%q]", got, want)
	}
	if mark := errorChain(r.stdout); mark != "" {
		t.Errorf("the terminal shows an error chain (%q):\n%s", mark, r.stdout)
	}
	if !strings.Contains(r.log, "level=WARN") || !strings.Contains(r.log, "500") {
		t.Errorf("the log file %s lacks the model's failure:\n%s", r.logPath, r.log)
	}
	if strings.Contains(r.log, "learning job failed") {
		t.Errorf("learning ran after a turn the model failed:\n%s", r.log)
	}

	v := runChat(t, fake.URL, nil, "hello?\n", "--verbose")
	if v.code != ExitOK || !strings.Contains(v.stderr, "level=WARN") {
		t.Errorf("--verbose: code %d, stderr without the WARN lines:\n%s", v.code, v.stderr)
	}
	if !strings.Contains(v.stdout, "turn failed (llm_error): ") {
		t.Errorf("--verbose: the failed turn's error is not shown:\n%s", v.stdout)
	}
	if _, err := os.Stat(v.logPath); err == nil {
		t.Errorf("--verbose wrote the log file %s too", v.logPath)
	}
}

// What a chat user reads when something failed is one plain sentence: the
// error chain stays in the log.
func TestChatErrorsArePlainSentences(t *testing.T) {
	tests := []struct {
		name  string
		reply testkit.Reply // every model answer
		more  func(*config.Config)
		input string
		want  string // the last reply
	}{
		{"model error", testkit.Reply{Status: 503}, nil, "hi\n",
			"Sorry, I couldn't reach the language model just now (HTTP 503). Please try again in a moment."},
		{"no valid plan", testkit.Reply{Text: "I'd rather not plan."}, nil, "/plan tidy the garage\n",
			planFailedText},
		{"out of steps, no summary", testkit.Reply{ToolCalls: []llm.ToolCall{testkit.Call("", "current_time", `{}`)}},
			func(c *config.Config) { c.Agent.MaxSteps = 1 }, "what time is it?\n",
			"I had to stop before finishing: I used all the steps I may take for one message."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := testkit.NewFakeLLM(t)
			fake.SetDefault(&tt.reply)
			r := runChat(t, fake.URL, func(c *config.Config) {
				c.Learning.Enabled = false
				if tt.more != nil {
					tt.more(c)
				}
			}, tt.input)
			got := botLines(r.stdout)
			if r.code != ExitOK || len(got) == 0 || got[len(got)-1] != tt.want {
				t.Fatalf("code %d, replies %q, want last %q\nstdout:\n%s\nstderr:\n%s", r.code, got, tt.want, r.stdout, r.stderr)
			}
			if mark := errorChain(r.stdout + r.stderr); mark != "" {
				t.Errorf("an error chain (%q) in the terminal:\n%s%s", mark, r.stdout, r.stderr)
			}
			if hasLogLine(r.stdout + r.stderr) {
				t.Errorf("log lines in the terminal:\n%s%s", r.stdout, r.stderr)
			}
		})
	}
}

// planFailedText is plans' answer when no plan could be made.
const planFailedText = "Sorry, I couldn't make a plan for that. Please try again in a moment, or put the task differently."

// A reply the model streams in pieces is printed as it comes, on one line,
// once: the send ends the line rather than print it again, and the text
// after it that the turn does not send is not shown on a pipe.
func TestChatStreamedReplyPrintedOnce(t *testing.T) {
	fake := testkit.NewFakeLLM(t)
	fake.Push(testkit.Reply{ArgPieces: 6, ToolCalls: []llm.ToolCall{
		testkit.Call("s1", "send_message", `{"text":"It is \"tea\" time, as streamed."}`)}},
		testkit.Reply{Text: "done"})
	r := runChat(t, fake.URL, func(c *config.Config) { c.Learning.Enabled = false }, "what time is it?\n")
	if got := botLines(r.stdout); len(got) != 1 || got[0] != `It is "tea" time, as streamed.` {
		t.Errorf("replies = %q\nstdout:\n%s", got, r.stdout)
	}
	if strings.Contains(r.stdout, "done") {
		t.Errorf("unsent text shown:\n%s", r.stdout)
	}
}
