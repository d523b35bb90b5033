package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/config"
	"github.com/switchboard-gateway/switchboard/gateway"
	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/internal/testkit/cfgfile"
	"github.com/switchboard-gateway/switchboard/learning"
	"github.com/switchboard-gateway/switchboard/llm"
	"github.com/switchboard-gateway/switchboard/router"
	"github.com/switchboard-gateway/switchboard/store"
)

// Acceptance tests of learning through the real wiring (gateway.Build): router,
// agent, store file, memory, profile and skill jobs, the scripted model on
// 127.0.0.1.

// lrnChan is a chat channel that records what the bot sends.
type lrnChan struct {
	mu     sync.Mutex
	sent   []channels.Outbound
	notify chan channels.Outbound
}

func (c *lrnChan) Name() string                                   { return "lrn" }
func (c *lrnChan) Run(ctx context.Context, _ channels.Sink) error { <-ctx.Done(); return nil }
func (c *lrnChan) Send(_ context.Context, m channels.Outbound) (string, error) {
	c.mu.Lock()
	c.sent = append(c.sent, m)
	n := len(c.sent)
	c.mu.Unlock()
	c.notify <- m
	return "out-" + strconv.Itoa(n), nil
}

type lrnRig struct {
	t       testing.TB
	fake    *testkit.FakeLLM
	cfgPath string
	opts    gateway.Options // how start builds the gateway
	a       *gateway.Gateway
	closed  map[*gateway.Gateway]bool // stopped already
	ch      *lrnChan
	seq     int

	mu       sync.Mutex
	onForced func(rec testkit.Recorded, lines map[int]string) string // the forced call's arguments
}

// newLrnRig runs the gateway with skills.self_improve mode, the learning
// section set by learn, and skill files.
func newLrnRig(t testing.TB, mode string, learn func(*config.Learning), skillFiles map[string]string) *lrnRig {
	t.Helper()
	return newLrnRigWith(t, gateway.Options{}, mode, learn, skillFiles)
}

// learningOn is newLrnRig's learn for learning after every turn (the
// default waits for ten turns or a pause).
func learningOn(l *config.Learning) { l.Enabled, l.EveryNTurns = true, 1 }

// newLrnRigWith is newLrnRig building the gateway with opts.
func newLrnRigWith(t testing.TB, opts gateway.Options, mode string, learn func(*config.Learning), skillFiles map[string]string) *lrnRig {
	t.Helper()
	r := &lrnRig{t: t, fake: testkit.NewFakeLLM(t), opts: opts}
	r.fake.SetDefault(&testkit.Reply{Func: r.reply})
	dir := t.TempDir()
	skillsDir := filepath.Join(dir, "skills")
	if err := os.MkdirAll(skillsDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range skillFiles {
		if err := os.WriteFile(filepath.Join(skillsDir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r.cfgPath = filepath.Join(dir, "config.yaml")
	cfg := config.Default()
	cfg.LLM.BaseURL, cfg.LLM.APIKey, cfg.LLM.Model, cfg.LLM.MaxRetries = r.fake.URL, "sk-test", "fake-model", 0
	cfg.Store.Path = filepath.Join(dir, "s.db")
	cfg.Skills.Dir, cfg.Skills.SelfImprove = skillsDir, mode
	cfg.HTTP.Listen = ""
	learn(&cfg.Learning)
	if err := cfgfile.WriteFile(r.cfgPath, cfg); err != nil {
		t.Fatal(err)
	}
	r.start()
	return r
}

func (r *lrnRig) start() {
	r.t.Helper()
	cfg, err := gateway.LoadConfig(r.cfgPath)
	if err != nil {
		r.t.Fatal(err)
	}
	r.a, err = gateway.Build(r.t.Context(), cfg, r.opts)
	if err != nil {
		r.t.Fatal(err)
	}
	r.ch = &lrnChan{notify: make(chan channels.Outbound, 100)}
	r.a.Router().AddChannel(r.ch, router.Access{AllowAll: true})
	if err := r.a.Router().Start(r.t.Context()); err != nil {
		r.t.Fatal(err)
	}
	a := r.a
	r.t.Cleanup(func() { r.stop(a, false) })
}

// stop shuts the gateway down; crash cancels running learning jobs at once.
func (r *lrnRig) stop(a *gateway.Gateway, crash bool) {
	if r.closed[a] {
		return
	}
	if r.closed == nil {
		r.closed = map[*gateway.Gateway]bool{}
	}
	r.closed[a] = true
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = a.Router().Shutdown(ctx)
	if crash {
		dead, kill := context.WithCancel(context.Background())
		kill()
		_ = a.LearningRunner().Shutdown(dead)
	}
	a.Close()
}

var lrnUserLine = regexp.MustCompile(`\[(\d+)\] USER: ("(?:[^"\\]|\\.)*")`)

// reply answers turns with "ok" and forced calls through onForced (or with
// nothing learned).
func (r *lrnRig) reply(rec testkit.Recorded) testkit.Reply {
	if rec.ForcedTool == "" {
		return testkit.Reply{Text: "ok"}
	}
	prompt := rec.Messages[len(rec.Messages)-1].Content
	lines := map[int]string{}
	for _, m := range lrnUserLine.FindAllStringSubmatch(prompt, -1) {
		n, _ := strconv.Atoi(m[1])
		var s string
		_ = json.Unmarshal([]byte(m[2]), &s)
		lines[n] = s
	}
	r.mu.Lock()
	f := r.onForced
	r.mu.Unlock()
	args := ""
	if f != nil {
		args = f(rec, lines)
	}
	if args == "" {
		args = map[string]string{
			learning.PassTool: `{"facts":[],"profile":[]}`,
			"review_skill":    `{"assessment":"worked","notes":"","improved_instructions":""}`,
		}[rec.ForcedTool]
	}
	return testkit.Reply{ToolCalls: []llm.ToolCall{testkit.Call("f1", rec.ForcedTool, args)}}
}

func (r *lrnRig) script(f func(rec testkit.Recorded, lines map[int]string) string) {
	r.mu.Lock()
	r.onForced = f
	r.mu.Unlock()
}

// say delivers a message and returns the reply and the turn's requests to
// the model (not the background ones).
func (r *lrnRig) say(chat, user string, group bool, text string) (string, []testkit.Recorded) {
	r.t.Helper()
	before := r.fake.Calls()
	reply := r.send(chat, user, group, text)
	var turn []testkit.Recorded
	for _, rec := range r.fake.Requests()[before:] {
		if rec.ForcedTool == "" {
			turn = append(turn, rec)
		}
	}
	return reply, turn
}

// send delivers a message and waits for the reply.
func (r *lrnRig) send(chat, user string, group bool, text string) string {
	r.t.Helper()
	r.seq++
	in := channels.Inbound{Channel: "lrn", ChatID: chat, ChatType: channels.DM, MessageID: strconv.Itoa(r.seq),
		UserID: user, UserName: user, DisplayName: strings.ToUpper(user[:1]) + user[1:], Text: text, Mentioned: true}
	if group {
		in.ChatType, in.ChatTitle = channels.Group, "Friends"
	}
	if err := r.a.Router().Deliver(r.t.Context(), in); err != nil {
		r.t.Fatal(err)
	}
	select {
	case out := <-r.ch.notify:
		return out.Text
	case <-r.t.Context().Done():
		r.t.Fatalf("no reply to %q", text)
	}
	return ""
}

// settle waits until the turn is over and its learning jobs are done.
func (r *lrnRig) settle() {
	r.t.Helper()
	if err := r.a.Router().Drain(r.t.Context()); err != nil {
		r.t.Fatal(err)
	}
	if err := r.a.LearningRunner().Drain(r.t.Context()); err != nil {
		r.t.Fatal(err)
	}
}

func (r *lrnRig) memories(user string, chat string) []string {
	r.t.Helper()
	o := store.Owners{User: store.UserKey("lrn", user)}
	if chat != "" {
		c, err := r.a.Store().EnsureChat(r.t.Context(), "lrn", chat, "", "")
		if err != nil {
			r.t.Fatal(err)
		}
		o = store.Owners{Chat: c.ID}
	}
	ms, err := r.a.Store().Memories(r.t.Context(), o, 0)
	if err != nil {
		r.t.Fatal(err)
	}
	var out []string
	for _, m := range ms {
		out = append(out, m.Text)
	}
	return out
}

func system(rec testkit.Recorded) string { return rec.Messages[0].Content }

func fact(text, scope string, source int, extra string) string {
	return fmt.Sprintf(`{"text":%q,"scope":%q,"source":%d%s}`, text, scope, source, extra)
}

// The reply goes out while the background jobs are still running: the
// extraction call is held by the model until the test lets it go.
func TestLearningReplyIsNotDelayedByJobs(t *testing.T) {
	r := newLrnRig(t, "propose", learningOn, nil)
	release := make(chan struct{})
	r.fake.SetDefault(&testkit.Reply{Func: func(rec testkit.Recorded) testkit.Reply {
		reply := r.reply(rec)
		if rec.ForcedTool != "" {
			reply.Block = release
		}
		return reply
	}})
	r.script(func(rec testkit.Recorded, lines map[int]string) string {
		if rec.ForcedTool == learning.PassTool {
			return `{"facts":[` + fact("Is allergic to peanuts", "user", 1, "") + `],"profile":[]}`
		}
		return ""
	})
	reply, _ := r.say("d1", "ada", false, "I'm allergic to peanuts.")
	if reply != "ok" {
		t.Fatalf("reply = %q", reply)
	}
	// The job has asked the model and is waiting for it: the reply came first.
	if err := r.fake.WaitCalls(t.Context(), 2); err != nil {
		t.Fatal(err)
	}
	if s := r.a.LearningRunner().Stats(); s.Succeeded != 0 || s.Running != 1 {
		t.Fatalf("runner stats when the reply arrived: %+v; want the job still running", s)
	}
	if got := r.memories("ada", ""); len(got) != 0 {
		t.Fatalf("memories before the job finished: %q", got)
	}
	close(release)
	r.settle()
	if got := r.memories("ada", ""); len(got) != 1 || got[0] != "Is allergic to peanuts" {
		t.Errorf("memories after the job = %q", got)
	}
	if s := r.a.LearningRunner().Stats(); s.Succeeded != 1 || s.Failed != 0 {
		t.Errorf("stats = %+v; want the learning pass done", s)
	}
}

// A fact told in one turn is recalled in a later turn about something else
// when it is relevant, and only then; an update supersedes it; /memory
// forget removes it from later prompts.
func TestLearningRecallSupersedeAndForget(t *testing.T) {
	r := newLrnRig(t, "propose", learningOn, nil)
	var berlinID string
	r.script(func(rec testkit.Recorded, lines map[int]string) string {
		if rec.ForcedTool != learning.PassTool {
			return ""
		}
		prompt := rec.Messages[len(rec.Messages)-1].Content
		var fs []string
		for n, l := range lines {
			switch {
			case strings.Contains(l, "allergic to peanuts"):
				fs = append(fs, fact("Is allergic to peanuts", "user", n, ""), fact("Lives in Berlin", "user", n, ""))
			case strings.Contains(l, "moved to Lisbon"):
				m := regexp.MustCompile(`#(\d+) \[user\] Lives in Berlin`).FindStringSubmatch(prompt)
				if m == nil {
					t.Errorf("the extraction prompt does not offer the Berlin memory to supersede:\n%s", prompt)
					return ""
				}
				berlinID = m[1]
				fs = append(fs, fact("Lives in Lisbon", "user", n, `,"supersedes":`+m[1]))
			}
		}
		return `{"facts":[` + strings.Join(fs, ",") + `]}`
	})

	r.say("d1", "ada", false, "By the way, I'm allergic to peanuts and I live in Berlin.")
	r.settle()
	if got := r.memories("ada", ""); len(got) != 2 {
		t.Fatalf("memories after turn 1 = %q", got)
	}

	_, reqs := r.say("d1", "ada", false, "What's the capital of France?")
	if p := system(reqs[0]); strings.Contains(p, "peanuts") || strings.Contains(p, "What you remember") {
		t.Errorf("an unrelated turn recalled memories:\n%s", p)
	}
	r.settle()
	_, reqs = r.say("d1", "ada", false, "Can you suggest a snack? I love peanut butter.")
	p := system(reqs[0])
	if !strings.Contains(p, "# What you remember about the user") || !strings.Contains(p, "- Is allergic to peanuts") {
		t.Errorf("the snack turn's prompt lacks the relevant memory:\n%s", p)
	}
	if strings.Contains(p, "Berlin") {
		t.Errorf("recall is by relevance, yet the irrelevant Berlin memory is in the prompt:\n%s", p)
	}
	r.settle()

	r.say("d1", "ada", false, "Big news: I moved to Lisbon!")
	r.settle()
	_, reqs = r.say("d1", "ada", false, "Where do I live these days?")
	p = system(reqs[0])
	if !strings.Contains(p, "Lives in Lisbon") || strings.Contains(p, "Berlin") {
		t.Errorf("after the update the prompt should know Lisbon, not Berlin:\n%s", p)
	}
	r.settle()

	// /memory lists, /memory forget N deletes.
	list, _ := r.say("d1", "ada", false, "/memory")
	m := regexp.MustCompile(`(\d+)\. Lives in Lisbon`).FindStringSubmatch(list)
	if m == nil || strings.Contains(list, "Berlin") {
		t.Fatalf("/memory = %q (Berlin id was %s)", list, berlinID)
	}
	if got, _ := r.say("d1", "ada", false, "/memory forget "+m[1]); got != "Forgotten: "+m[1]+"." {
		t.Fatalf("/memory forget = %q", got)
	}
	_, reqs = r.say("d1", "ada", false, "Where do I live these days?")
	if p := system(reqs[0]); strings.Contains(p, "Lisbon") || strings.Contains(p, "Berlin") {
		t.Errorf("a forgotten memory is still in the prompt:\n%s", p)
	}
}

// Two users in one group: neither's private memory or profile is in any
// request made for the other, and the group sees only the group's memories.
func TestLearningIsolatesUsersInAGroup(t *testing.T) {
	r := newLrnRig(t, "propose", learningOn, nil)
	r.script(func(rec testkit.Recorded, lines map[int]string) string {
		if rec.ForcedTool != learning.PassTool {
			return ""
		}
		var fs, ps []string
		for n, l := range lines {
			if callMe.MatchString(l) {
				name := callMe.FindStringSubmatch(l)[1]
				ps = append(ps, fmt.Sprintf(`{"dimension":"name","value":%q,"source":%d}`, name+" the Great", n))
			}
			switch {
			case strings.Contains(l, "allergic to peanuts"): // ada says so
				fs = append(fs, fact("Secret-A: allergic to peanuts", "user", n, ""))
			case strings.Contains(l, "allergic to shellfish"): // bob says so
				fs = append(fs, fact("Secret-B: allergic to shellfish", "user", n, ""))
			case strings.Contains(l, "picnic is on Saturday"):
				fs = append(fs, fact("The group picnic is on Saturday", "chat", n, ""), fact("Secret-A2: organises the picnic food", "user", n, ""))
			}
		}
		return `{"facts":[` + strings.Join(fs, ",") + `],"profile":[` + strings.Join(ps, ",") + `]}`
	})
	talk := func(chat, user string, group bool, text string) []testkit.Recorded {
		_, reqs := r.say(chat, user, group, text)
		r.settle()
		return reqs
	}
	talk("dm-ada", "ada", false, "Please call me Ada. I'm allergic to peanuts.")
	talk("dm-bob", "bob", false, "Please call me Bob. I'm allergic to shellfish.")
	talk("g1", "ada", true, "Our picnic is on Saturday, I'll bring the food.")

	if got := r.memories("", "g1"); len(got) != 1 || got[0] != "The group picnic is on Saturday" {
		t.Fatalf("the group's memories = %q", got)
	}
	groupBob := talk("g1", "bob", true, "Any snack ideas for the picnic? Peanuts, shellfish, food?")
	groupAda := talk("g1", "ada", true, "What about the picnic food? Peanuts or shellfish?")
	dmAda := talk("dm-ada", "ada", false, "Do shellfish or peanuts or picnic food ring a bell?")
	dmBob := talk("dm-bob", "bob", false, "Do shellfish or peanuts or picnic food ring a bell?")

	for _, c := range []struct {
		name      string
		reqs      []testkit.Recorded
		want, not []string
	}{
		{"bob in the group", groupBob, []string{"The group picnic is on Saturday"}, []string{"Secret-A", "Secret-B", "the Great"}},
		{"ada in the group", groupAda, []string{"The group picnic is on Saturday"}, []string{"Secret-A", "Secret-B", "the Great"}},
		{"ada's DM", dmAda, []string{"Secret-A: allergic to peanuts", "Secret-A2", "Ada the Great"}, []string{"Secret-B", "Bob the Great", "group picnic"}},
		{"bob's DM", dmBob, []string{"Secret-B: allergic to shellfish", "Bob the Great"}, []string{"Secret-A", "Ada the Great", "group picnic"}},
	} {
		if len(c.reqs) == 0 {
			t.Fatalf("%s: no request recorded", c.name)
		}
		for _, rec := range c.reqs {
			raw := string(rec.Raw)
			for _, w := range c.want {
				if !strings.Contains(raw, w) {
					t.Errorf("%s: the request lacks %q:\n%s", c.name, w, system(rec))
				}
			}
			for _, n := range c.not {
				if strings.Contains(raw, n) {
					t.Errorf("%s: the request contains %q:\n%s", c.name, n, system(rec))
				}
			}
		}
	}
	// A background request is made for one user: it never holds the other
	// user's memories or profile.
	for _, rec := range r.fake.Requests() {
		raw := string(rec.Raw)
		if rec.ForcedTool != "" && (strings.Contains(raw, "Secret-A") && strings.Contains(raw, "Secret-B") ||
			strings.Contains(raw, "Ada the Great") && strings.Contains(raw, "Bob the Great")) {
			t.Errorf("one background request holds both users' data:\n%s", raw)
		}
	}
}

var callMe = regexp.MustCompile(`call me (\w+)`)

// A job that panics and one that times out leave the turn, its reply and
// the store intact, and do not keep the other jobs from running.
func TestLearningFailingJobsLeaveTheTurnIntact(t *testing.T) {
	var mu sync.Mutex
	var panics, slow int
	// The configured memory job, beside one that panics and one that
	// times out.
	failing := func(c learning.Config) *learning.Runner {
		jobs := []learning.Job{
			{Name: "panics", Run: func(context.Context, learning.Trigger) error { mu.Lock(); panics++; mu.Unlock(); panic("boom") }},
			{Name: "slow", Run: func(ctx context.Context, _ learning.Trigger) error {
				mu.Lock()
				slow++
				mu.Unlock()
				<-ctx.Done()
				return ctx.Err()
			}},
		}
		for _, j := range c.Jobs {
			if j.Name == learning.PassJobName {
				jobs = append(jobs, j)
			}
		}
		// The timeout is every job's: long enough for the memory job's
		// model call on a loaded machine (200 ms was not, under CI's -race).
		return learning.NewRunner(learning.Config{Jobs: jobs, EveryNTurns: 1, Timeout: 3 * time.Second, RetryDelay: time.Hour})
	}
	r := newLrnRigWith(t, gateway.Options{LearningRunner: failing}, "off", learningOn, nil)
	r.script(func(rec testkit.Recorded, lines map[int]string) string {
		return `{"facts":[` + fact("Plays chess", "user", 1, "") + `]}`
	})

	reply, _ := r.say("d1", "ada", false, "I play chess every Sunday.")
	r.settle()
	if reply != "ok" {
		t.Errorf("reply = %q", reply)
	}
	s := r.a.LearningRunner().Stats()
	if s.Panics != 1 || s.TimedOut != 1 || s.Succeeded != 1 || s.Retries != 1 {
		t.Errorf("stats = %+v; want one panic, one timeout, the memory job done, a retry scheduled", s)
	}
	if got := r.memories("ada", ""); len(got) != 1 {
		t.Errorf("memories = %q; the memory job must run despite the others", got)
	}
	ctx := t.Context()
	chat, _ := r.a.Store().EnsureChat(ctx, "lrn", "d1", "", "")
	turns, _ := r.a.Store().Turns(ctx, chat.ID, 0)
	if len(turns) != 1 || turns[0].Status != store.TurnCompleted || turns[0].Error != "" {
		t.Errorf("turns = %+v; want one completed turn", turns)
	}
	if pending, _ := r.a.Store().PendingInbox(ctx); len(pending) != 0 {
		t.Errorf("%d messages pending", len(pending))
	}
	var check string
	if err := r.a.Store().DB().QueryRowContext(ctx, "PRAGMA integrity_check").Scan(&check); err != nil || check != "ok" {
		t.Errorf("integrity_check = %q, %v", check, err)
	}
	// The next turn works as before.
	if reply, _ := r.say("d1", "ada", false, "Thanks!"); reply != "ok" {
		t.Errorf("next reply = %q", reply)
	}
}

// A crash while the extraction call is out: after the restart, the next run
// reads from the cursor (the crashed run's message included) and stores each
// fact once.
func TestLearningResumesFromTheCursorAfterACrash(t *testing.T) {
	r := newLrnRig(t, "off", learningOn, nil)
	hold := make(chan struct{}) // never closed: the first run never gets its answer
	var held atomic.Bool
	r.fake.SetDefault(&testkit.Reply{Func: func(rec testkit.Recorded) testkit.Reply {
		reply := r.reply(rec)
		if rec.ForcedTool == learning.PassTool && held.CompareAndSwap(false, true) {
			reply.Block = hold
		}
		return reply
	}})
	var mu sync.Mutex
	var prompts []string
	extractions := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), prompts...)
	}
	r.script(func(rec testkit.Recorded, lines map[int]string) string {
		if rec.ForcedTool != learning.PassTool {
			return ""
		}
		mu.Lock()
		prompts = append(prompts, rec.Messages[1].Content)
		mu.Unlock()
		var fs []string
		for n, l := range lines {
			if strings.Contains(l, "violin") {
				fs = append(fs, fact("Has a daughter, Mia, who plays the violin", "user", n, ""))
			}
		}
		return `{"facts":[` + strings.Join(fs, ",") + `]}`
	})
	r.say("d1", "ada", false, "My daughter Mia plays the violin.")
	if err := r.fake.WaitCalls(t.Context(), 2); err != nil {
		t.Fatal(err)
	}
	r.stop(r.a, true) // crash: the held job is cancelled, nothing committed
	if n := len(extractions()); n != 1 {
		t.Fatalf("%d extraction calls before the crash, want 1", n)
	}

	r.start()
	r.say("d1", "ada", false, "Also, I like jazz.")
	r.settle()
	if got := r.memories("ada", ""); len(got) != 1 || got[0] != "Has a daughter, Mia, who plays the violin" {
		t.Errorf("memories after the restart = %q; want the fact once", got)
	}
	all := extractions()
	last := all[len(all)-1]
	if !strings.Contains(last, "My daughter Mia") || !strings.Contains(last, "I like jazz") {
		t.Errorf("the resumed run's prompt:\n%s\nwant both the crashed run's message and the new one", last)
	}
	r.say("d1", "ada", false, "Bye")
	r.settle()
	if got := r.memories("ada", ""); len(got) != 1 {
		t.Errorf("memories after another run = %q; want no duplicate", got)
	}
}

const weatherSkill = `name: weather
description: Weather for a city.
activation: triggers
triggers: [weather]
instructions: Answer with the temperature.
`

// A turn with an active skill yields a proposal; the CLI lists and applies
// it, the next turn uses it, and revert restores the file's instructions.
func TestLearningSkillProposalApplyAndRevert(t *testing.T) {
	r := newLrnRig(t, "propose", learningOn, map[string]string{"weather.yaml": weatherSkill})
	r.script(func(rec testkit.Recorded, lines map[int]string) string {
		if rec.ForcedTool != "review_skill" {
			return ""
		}
		if prompt := rec.Messages[1].Content; !strings.Contains(prompt, "Skill: weather\n\nCurrent instructions:\n") {
			t.Errorf("review prompt:\n%s", prompt)
		}
		return `{"assessment":"mixed","notes":"The user had to ask for the city.","improved_instructions":"Name the city, then the temperature in °C."}`
	})
	_, reqs := r.say("d1", "ada", false, "What's the weather in Paris?")
	if !strings.Contains(system(reqs[0]), "Answer with the temperature.") {
		t.Fatalf("the skill is not active:\n%s", system(reqs[0]))
	}
	r.settle()
	cli := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := run(t.Context(), append(append([]string{"skills", "proposals"}, args...), "--config", r.cfgPath), strings.NewReader(""), &out, &errb)
		return code, out.String(), errb.String()
	}
	code, out, _ := cli()
	if code != 0 || !regexp.MustCompile(`(?m)^1  weather  .*\(proposed\)  mixed$`).MatchString(out) ||
		!strings.Contains(out, "why: The user had to ask for the city.") || !strings.Contains(out, "| Name the city, then the temperature in °C.") {
		t.Fatalf("skills proposals: %d\n%s", code, out)
	}
	// Proposing changes nothing yet.
	_, reqs = r.say("d1", "ada", false, "And the weather in Rome?")
	if !strings.Contains(system(reqs[0]), "Answer with the temperature.") {
		t.Errorf("a proposal changed the prompt before it was applied:\n%s", system(reqs[0]))
	}
	r.settle()

	if code, out, errs := cli("apply", "1"); code != 0 || !strings.Contains(out, "applied proposal 1 to skill weather") {
		t.Fatalf("apply: %d %s %s", code, out, errs)
	}
	_, reqs = r.say("d1", "ada", false, "Weather in Oslo?")
	p := system(reqs[0])
	if !strings.Contains(p, "Name the city, then the temperature in °C.") || strings.Contains(p, "Answer with the temperature.") {
		t.Errorf("after apply, the prompt:\n%s\nwant the learned instructions", p)
	}
	r.settle()
	if code, out, _ := cli("revert", "weather"); code != 0 || !strings.Contains(out, "reverted skill weather") {
		t.Fatalf("revert: %d %s", code, out)
	}
	_, reqs = r.say("d1", "ada", false, "Weather in Lima?")
	if p := system(reqs[0]); !strings.Contains(p, "Answer with the temperature.") || strings.Contains(p, "Name the city") {
		t.Errorf("after revert, the prompt:\n%s\nwant the file's instructions", p)
	}
	if code, _, errs := cli("revert", "weather"); code != 1 || !strings.Contains(errs, "has no applied proposal") {
		t.Errorf("second revert: %d %s", code, errs)
	}
	if code, _, errs := cli("apply", "99"); code != 1 || !strings.Contains(errs, "no proposal 99") {
		t.Errorf("apply unknown: %d %s", code, errs)
	}
	var out2, errb bytes.Buffer
	if code := run(t.Context(), []string{"skills", "--config", r.cfgPath}, strings.NewReader(""), &out2, &errb); code != 2 ||
		!strings.Contains(errb.String(), "usage: switchboard skills proposals") {
		t.Errorf("skills without a subcommand: %d %s", code, errb.String())
	}
}

// With skills.self_improve: apply, the proposal is used from the next turn
// without the operator; the skill file is never written.
func TestLearningSkillSelfImproveApply(t *testing.T) {
	r := newLrnRig(t, "apply", learningOn, map[string]string{"weather.yaml": weatherSkill})
	r.script(func(rec testkit.Recorded, lines map[int]string) string {
		if rec.ForcedTool != "review_skill" {
			return ""
		}
		return `{"assessment":"failed","notes":"No city.","improved_instructions":"Name the city first."}`
	})
	r.say("d1", "ada", false, "weather in Paris?")
	r.settle()
	_, reqs := r.say("d1", "ada", false, "weather in Rome?")
	if p := system(reqs[0]); !strings.Contains(p, "Name the city first.") {
		t.Errorf("apply mode: the next turn's prompt:\n%s\nwant the learned instructions", p)
	}
	cfg, _ := gateway.LoadConfig(r.cfgPath)
	data, err := os.ReadFile(filepath.Join(cfg.Skills.Dir, "weather.yaml"))
	if err != nil || string(data) != weatherSkill {
		t.Errorf("the skill file changed: %q, %v", data, err)
	}
}

// BenchmarkReplyLatency measures the time from a message to its reply
// through the real wiring: with learning off; with recall in the prompt but
// no jobs; with jobs that finish at once; and with jobs whose model calls
// take 5 s each.
func BenchmarkReplyLatency(b *testing.B) {
	for _, bc := range []struct {
		name     string
		learning func(*config.Learning)
		jobDelay time.Duration
	}{
		{"learning_off", func(l *config.Learning) { l.Enabled = false }, 0},
		{"recall_no_jobs", func(l *config.Learning) { l.Enabled, l.EveryNTurns = true, 1000000 }, 0}, // prompt recall, jobs gated off
		{"jobs_instant", learningOn, 0},
		{"jobs_5s", learningOn, 5 * time.Second},
	} {
		b.Run(bc.name, func(b *testing.B) {
			r := newLrnRig(b, "off", bc.learning, nil)
			r.fake.SetDefault(&testkit.Reply{Func: func(rec testkit.Recorded) testkit.Reply {
				reply := r.reply(rec)
				if rec.ForcedTool != "" {
					reply.Delay = bc.jobDelay
				}
				return reply
			}})
			i := 0
			for b.Loop() {
				i++
				if got := r.send("d1", "ada", false, "message "+strconv.Itoa(i)); got != "ok" {
					b.Fatalf("reply %q", got)
				}
			}
			b.StopTimer()
			s := r.a.LearningRunner().Stats()
			b.ReportMetric(float64(s.Runs), "job-runs")
			r.stop(r.a, true) // jobs still waiting on the model are cancelled
		})
	}
}

// warnLog collects the WARN lines of a text log.
type warnLog struct{ testkit.SyncBuffer }

func (w *warnLog) warnings() []string {
	var out []string
	for _, l := range strings.Split(w.String(), "\n") {
		if strings.Contains(l, "level=WARN") {
			out = append(out, l)
		}
	}
	return out
}

// A model that answers forced calls with text: learning turns itself off
// after three passes in a row with one warning, makes no further learning
// calls and no retries, and `switchboard doctor` says so.
func TestLearningTurnsItselfOffWhenTheModelCannotForceCalls(t *testing.T) {
	logs := &warnLog{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	r := newLrnRigWith(t, gateway.Options{Logger: log}, "off", learningOn, nil)
	r.fake.SetDefault(&testkit.Reply{Func: func(rec testkit.Recorded) testkit.Reply {
		if rec.ForcedTool != "" {
			return testkit.Reply{Text: `{"facts": []}`} // text, not the call
		}
		return testkit.Reply{Text: "ok"}
	}})
	for i := range 4 {
		if reply, _ := r.say("d1", "ada", false, fmt.Sprintf("I like tea, message %d.", i)); reply != "ok" {
			t.Fatalf("reply = %q", reply)
		}
		r.settle()
	}
	forced := 0
	for _, rec := range r.fake.Requests() {
		if rec.ForcedTool != "" {
			forced++
		}
	}
	if forced != 3 {
		t.Errorf("%d learning calls over 4 turns, want 3 (three text answers in a row, then learning is off)", forced)
	}
	if w := logs.warnings(); len(w) != 1 || !strings.Contains(w[0], "learning is off") {
		t.Errorf("warnings = %q, want exactly one saying learning is off", w)
	}
	if s := r.a.LearningRunner().Stats(); s.Disabled == nil || s.Retries != 0 {
		t.Errorf("stats = %+v; want learning disabled, no retry", s)
	}
	var out bytes.Buffer
	run(t.Context(), []string{"doctor", "--config", r.cfgPath}, strings.NewReader(""), &out, &out)
	if !strings.Contains(out.String(), "warn  learning  off since ") || !strings.Contains(out.String(), "model fake-model cannot make forced function calls") {
		t.Errorf("doctor does not say learning is off:\n%s", out.String())
	}
}
