package e2e

// TestChaos is the crash-recovery test of issue 10. serve runs in child
// processes (this test binary, see TestMain) under a scripted workload of
// many chats, and each child is killed with SIGKILL at a random point, then
// the next one starts on the same database, cycle after cycle. At the end a
// last child drains everything and is stopped with SIGTERM, and the test
// checks every message against what the platform received and what the
// store holds: answered, in order per chat, and the database passes PRAGMA
// integrity_check (also checked on a copy taken after every kill). Where
// the platforms differ:
//   - Discord: nothing lost, and exactly once. A new process starts a new
//     gateway session, and Discord replays nothing to it: what the gateway
//     delivered to a process that died before storing it, it fetches over
//     REST when its session is READY, in each chat after the newest message
//     stored. That needs a chat the bot has talked in (no API lists a bot's
//     DMs), so a warm-up run first answers one message in every chat (see
//     chaosChannel.warmUp). Sends carry a nonce with enforce_nonce, so a
//     send repeated after a restart can be recognised.
//   - Telegram: nothing lost (an update is confirmed only after it is
//     stored). The fake Bot API has the real offset semantics: an update is
//     handed out again, to the next child too, until a later getUpdates
//     confirms it with a higher offset. The Bot API has no idempotency
//     key, so a process killed after Telegram accepted sendMessage and
//     before the delivery record commits sends the answer again after the
//     restart; such a duplicate is allowed only where it is explained (see
//     checkChaosAnswers), and counted.
//   - Slack: nothing lost (a Socket Mode envelope is acknowledged only
//     after its message is stored). The fake sends an envelope again until
//     it is acknowledged, to the next child's connection too, as Slack
//     does. chat.postMessage has no idempotency key either, so a duplicate
//     is allowed in the same window as on Telegram, and counted.
//   - WhatsApp: nothing lost (the webhook answers 200 only after the
//     message is stored). The fake posts each delivery through the tap to
//     the child's http.listen, and again every 200 ms until a child
//     answers 200, as Meta redelivers; a redelivery of a stored message is
//     the same message (its wamid). The Graph API's send has no
//     idempotency key either: a duplicate is allowed in the same window
//     as on Telegram, and counted.
//   - Email (real Dovecot and Postfix, email_chaos_test.go): nothing lost
//     (a mail is flagged \Seen only after it is stored); SMTP has no
//     idempotency key, so a duplicate is allowed in the same window, and
//     counted; it carries the same Message-ID as the first copy.
//   - Matrix: nothing lost, and exactly once, against a real homeserver
//     (dendrite, internal/dendrite). The /sync token is stored only after
//     the batch's messages are, so a dead child's batch comes again to the
//     next one; each part is PUT with a transaction id derived from the
//     message and the part, so a send repeated after a restart is the
//     event the homeserver already has. A warm-up run first: a bot's very
//     first /sync takes no messages (history).
//
// Each cycle's kill point is one of these, chosen by the seed:
//   - a random time after the start (startup, replay of unfinished messages);
//   - the nth model request of the cycle, at once (the call is in flight) or
//     a little later;
//   - the nth send the platform accepted, before its answer reaches the
//     child: the window in which only an idempotent send avoids a duplicate;
//   - the nth send whose answer reached the child, a few milliseconds later:
//     the delivery record is being written;
//   - the arrival of messages: right after getUpdates handed updates over
//     (Telegram), after a dispatch on the gateway (Discord), after a
//     user's message went out as a Socket Mode envelope (Slack), or after
//     the child answered a webhook delivery 200 (WhatsApp): intake;
//   - Telegram: a poll that would confirm delivered updates, before the Bot
//     API sees it: the offset confirmation.
//
// On Discord, the kill points other than a timer or an inbound event count
// their events only once the cycle's messages are stored (see armLate).
//
// The model answers each message by its id, as decided by the seed: with
// text; with a current_time call, then text (a committed tool step); or with
// send_message carrying the answer, then a final text that must never be
// sent (never both). Answers echo the id, so each is matched to its message.
//
// Between a child and a fake platform sits a tap, a small proxy made anew
// for each child: it fires the kill points above at the exact moment,
// tells which child sent each message the platform accepted, and delays
// each send on both sides of the platform, as a slow network would: before
// the send reaches the platform, and before the platform's answer reaches
// the child, each by a time drawn from the seed in [0, -chaos.senddelay]
// (50 ms by default, to keep CI quick; the long run below uses 200 ms).
//
// At the end each channel reports, with t.Logf whether it passed or not,
// as a sentence and as a line of JSON after "chaos-result ": the kills
// (by kill point), the messages, lost ones (the test fails on any),
// doubled ones (count and share of the messages; Discord fails on any),
// the Telegram updates handed again to a later child, and two times
// measured for each child started after a kill: restart to answer, from
// the child's start to the first reply of it the platform accepted, and
// restart to first poll, from its start to its first getUpdates (Telegram)
// or its READY session (Discord) or its apps.connections.open (Slack) or
// its first webhook delivery answered 200 (WhatsApp); each as median, p95 and max, with the
// number of children killed before that moment came (they give no time).
//
// The seed fixes the workload, every cycle's kill point and the send
// delays; the instant a kill lands still depends on scheduling, so a
// replay repeats the same faults at the same kinds of moments, not bit for
// bit. A failure prints the flags that replay it. By hand, 450 kills (150
// per channel) with the figures, about 5 minutes without -race:
//
//	go test -count=1 -v -run 'TestChaos' -timeout 60m ./e2e/ -chaos.cycles=150 -chaos.senddelay=200ms | grep -E 'chaos-result|^(---|ok|FAIL)'
//
// and a replay: go test -race -run 'TestChaos' ./e2e/ -chaos.cycles=500 -chaos.seed=N
// (the package comes before the -chaos flags, which go test does not know)

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/mattn/go-sqlite3"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/channels/discord"
	"github.com/switchboard-gateway/switchboard/channels/matrix"
	"github.com/switchboard-gateway/switchboard/channels/registry"
	"github.com/switchboard-gateway/switchboard/channels/slack"
	"github.com/switchboard-gateway/switchboard/channels/telegram"
	"github.com/switchboard-gateway/switchboard/channels/whatsapp"
	"github.com/switchboard-gateway/switchboard/config"
	"github.com/switchboard-gateway/switchboard/internal/dendrite"
	"github.com/switchboard-gateway/switchboard/internal/discordfake"
	"github.com/switchboard-gateway/switchboard/internal/slackfake"
	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/internal/testkit/cfgfile"
	"github.com/switchboard-gateway/switchboard/internal/tgfake"
	"github.com/switchboard-gateway/switchboard/internal/wafake"
	"github.com/switchboard-gateway/switchboard/llm"
)

var (
	chaosCycles    = flag.Int("chaos.cycles", 50, "TestChaos: kill/restart cycles of each channel")
	chaosSeed      = flag.Uint64("chaos.seed", 0, "TestChaos: seed of the workload and the kill points (0: a new one, printed)")
	chaosSendDelay = flag.Duration("chaos.senddelay", 50*time.Millisecond, "TestChaos: the longest delay on each side of a send (on its way to the platform, and its answer on the way back), each drawn from the seed in [0, this]")
)

const (
	// chaosChats talk to the bot at once; each message goes to a random one.
	chaosChats = 24
	// chaosMaxPerCycle bounds the messages a cycle posts (1 to it, 3 on
	// average).
	chaosMaxPerCycle = 5
	// chaosFallback ends a cycle whose kill point did not come (say, the
	// nth send of a cycle with fewer): a kill at a random time, in effect.
	chaosFallback = 3 * time.Second
)

func TestChaos(t *testing.T) {
	t.Parallel() // beside the tests that wait on the wall clock
	seed := *chaosSeed
	if seed == 0 {
		seed = rand.Uint64()
	}
	run := chaosRun{seed: seed, cycles: max(*chaosCycles, 1), sendDelay: max(*chaosSendDelay, 0)}
	t.Logf("seed %d, %d cycles per channel, sends delayed up to %s each way; replay with %s", seed, run.cycles, run.sendDelay, run.flags())
	// Every platform of the registry goes through the kills: one without
	// a rig here fails the test rather than go untested.
	// The platforms run side by side (one per core at once, parallelBusy):
	// each rig has its own fakes, children and store.
	for _, name := range registry.Names() {
		t.Run(name, func(t *testing.T) {
			parallelBusy(t)
			rig, ok := chaosRigs[name]
			if !ok {
				t.Fatalf("channel %q has no chaos rig: add one to chaosRigs (a fake platform the child serves, its kill points), so that kills show it loses nothing", name)
			}
			runChaos(t, rig(t), run)
		})
	}
}

// chaosBusyNotice begins the line a user who waits in line for a turn
// gets (router/busy.go): it answers no message, and it is no copy.
const chaosBusyNotice = "Lots of people are writing to me right now: "

// chaosRigs make each platform's side of the chaos test, by channel name.
var chaosRigs = map[string]func(t *testing.T) chaosChannel{
	"telegram": func(t *testing.T) chaosChannel { return newTelegramChaos(t) },
	"discord":  func(t *testing.T) chaosChannel { return newDiscordChaos(t) },
	"slack":    func(t *testing.T) chaosChannel { return newSlackChaos(t) },
	"whatsapp": func(t *testing.T) chaosChannel { return newWhatsAppChaos(t) },
	"email":    func(t *testing.T) chaosChannel { return newEmailChaos(t) },
	"matrix":   func(t *testing.T) chaosChannel { return newMatrixChaos(t) },
}

// chaosRun is what the flags set for a run.
type chaosRun struct {
	seed      uint64
	cycles    int
	sendDelay time.Duration
}

func (r chaosRun) flags() string {
	return fmt.Sprintf("-chaos.seed=%d -chaos.cycles=%d -chaos.senddelay=%s", r.seed, r.cycles, r.sendDelay)
}

// chaosEvent is a kind of moment a kill point waits for.
type chaosEvent int

const (
	evTimer        chaosEvent = iota // a random time after the start
	evModelCall                      // a model request arrived; the child waits for the answer
	evSendAccepted                   // the platform accepted a message; its answer is held from the child
	evSendAnswered                   // the child has the platform's answer to a send
	evInbound                        // messages reached the child (getUpdates answered, or a dispatch)
	evConfirm                        // Telegram: a poll confirming delivered updates, not yet forwarded
	numChaosEvents
)

var chaosEventNames = [numChaosEvents]string{"timer", "model call", "send accepted", "send answered", "inbound", "offset confirmation"}

// killPlan is a cycle's kill point: the nth event of a kind, then delay (0:
// while the event's caller waits).
type killPlan struct {
	event chaosEvent
	nth   int
	delay time.Duration
}

func (p killPlan) String() string {
	if p.event >= numChaosEvents {
		return "none"
	}
	if p.event == evTimer {
		return fmt.Sprintf("%s after the start", p.delay)
	}
	return fmt.Sprintf("%s #%d + %s", chaosEventNames[p.event], p.nth, p.delay)
}

// pickKill draws a kill point among the events the channel has. late
// (armLate) keeps the nth at 1: the events before the cycle's messages were
// stored are not counted, and a second one may not come.
func pickKill(rng *rand.Rand, events []chaosEvent, late bool) killPlan {
	p := killPlan{event: events[rng.IntN(len(events))], nth: 1}
	switch p.event {
	case evTimer:
		p.delay = time.Duration(rng.IntN(600)) * time.Millisecond
	case evModelCall:
		p.nth = 1 + rng.IntN(3)
		if rng.IntN(2) == 0 {
			p.delay = time.Duration(rng.IntN(40)) * time.Millisecond
		}
	case evSendAccepted:
		p.nth = 1 + rng.IntN(2)
	case evSendAnswered:
		p.nth = 1 + rng.IntN(2)
		p.delay = time.Duration(rng.IntN(4000)) * time.Microsecond
	case evInbound:
		// Telegram hands a cycle's messages over in one poll, as a rule.
		p.delay = time.Duration(rng.IntN(5000)) * time.Microsecond
	}
	if late && p.event != evInbound {
		p.nth = 1
	}
	return p
}

// chaosCycle is one child's life, from its start to its kill.
type chaosCycle struct {
	n      int
	plan   killPlan
	counts [numChaosEvents]atomic.Int32
	armed  atomic.Bool   // events count towards the kill point (see chaosChannel.armLate)
	killed chan struct{} // closed once the child is dead
	ready  chan struct{} // Discord: closed once the child has a gateway session
	once   sync.Once     // closes ready

	mu       sync.Mutex
	waiting  []*chaosMsg // armLate: armed once the model was asked about each
	posted   bool        // waiting is set
	child    *crashChild
	started  time.Time
	polled   time.Time     // the child's first getUpdates (Telegram) or its READY (Discord) reached the tap
	answered time.Time     // the platform accepted the child's first reply
	lived    time.Duration // from the start to the kill
	why      string        // what killed it
}

func newChaosCycle(n int, plan killPlan) *chaosCycle {
	return &chaosCycle{n: n, plan: plan, killed: make(chan struct{}), ready: make(chan struct{})}
}

func (c *chaosCycle) markReady() { c.once.Do(func() { close(c.ready) }) }

// first sets *at, one of the cycle's times, to now if it is not set yet.
func (c *chaosCycle) first(at *time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if at.IsZero() {
		*at = time.Now()
	}
}

// since returns how long after the child's start at came (false: never).
func (c *chaosCycle) since(at *time.Time) (time.Duration, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return at.Sub(c.started), !at.IsZero()
}

// start runs the cycle's child.
func (c *chaosCycle) start(t *testing.T, rig *crashRig) *crashChild {
	t.Helper()
	child := rig.start(t)
	c.mu.Lock()
	c.child, c.started = child, time.Now()
	c.mu.Unlock()
	if c.plan.event == evTimer {
		time.AfterFunc(c.plan.delay, func() { c.kill(c.plan.String()) })
	}
	return child
}

// armWhenAsked arms the cycle once asked holds for each of msgs: now, or
// when the model is asked about the last of them (that call then counts).
func (c *chaosCycle) armWhenAsked(msgs []*chaosMsg, asked func(id string) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.waiting, c.posted = msgs, true
	c.armIfAskedLocked(asked)
}

func (c *chaosCycle) armIfAskedLocked(asked func(id string) bool) {
	if c.posted && !c.armed.Load() && !slices.ContainsFunc(c.waiting, func(m *chaosMsg) bool { return !asked(m.id) }) {
		c.armed.Store(true)
	}
}

// event counts an event and fires the kill point when it is the one.
func (c *chaosCycle) event(e chaosEvent) {
	if c == nil || e != c.plan.event || !c.armed.Load() || int(c.counts[e].Add(1)) != c.plan.nth {
		return
	}
	if c.plan.delay == 0 {
		c.kill(c.plan.String())
		return
	}
	time.AfterFunc(c.plan.delay, func() { c.kill(c.plan.String()) })
}

// kill sends SIGKILL to the child (once) and returns when it is dead.
func (c *chaosCycle) kill(why string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead() || c.child == nil {
		return
	}
	c.why, c.lived = why, time.Since(c.started)
	c.child.kill()
	close(c.killed)
}

func (c *chaosCycle) dead() bool {
	select {
	case <-c.killed:
		return true
	default:
		return false
	}
}

func (c *chaosCycle) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.plan.event >= numChaosEvents {
		return fmt.Sprintf("child %d (a clean run)", c.n)
	}
	return fmt.Sprintf("child %d (kill point %s; killed %s after its start, at %s)", c.n, c.plan, c.lived.Round(time.Millisecond), c.why)
}

// answerKind is how the model answers a message.
type answerKind int

const (
	answerText answerKind = iota // text: the fallback sends it
	answerTool                   // current_time, then text
	answerSend                   // send_message with the answer, then a final text never sent
)

// chaosMsg is a message of the workload.
type chaosMsg struct {
	id    string // "c03m007": chat 3's 7th message; the model's answer echoes it
	chat  int
	kind  answerKind
	cycle int // the cycle that posted it (0 while not posted)

	chatKey, platformID string // the inbox's key of the message
}

// chaosAnswer is the text that answers message id; the final text of a
// send_message answer is chaosNeverSent.
func chaosAnswer(id string) string    { return "answer " + id }
func chaosNeverSent(id string) string { return "final " + id + " (never sent: send_message answered)" }

var (
	chaosCaughtUpRe = regexp.MustCompile(`msg="discord: delivered the messages the catch-up found".* messages=(\d+)`)
	chaosIDRe       = regexp.MustCompile(`\bc\d{2}m\d{3}\b`)
	chaosAnswerRe   = regexp.MustCompile(`^answer (c\d{2}m\d{3})$`)
)

// chaosWorkload is every message of a run, and how the model answers.
type chaosWorkload struct {
	rng *rand.Rand // the test goroutine's

	mu    sync.Mutex
	msgs  []*chaosMsg
	byID  map[string]*chaosMsg
	next  [chaosChats]int
	delay *rand.Rand // the model's answer delays (under mu)
}

func newChaosWorkload(seed uint64) *chaosWorkload {
	return &chaosWorkload{
		rng:   rand.New(rand.NewPCG(seed, 1)),
		delay: rand.New(rand.NewPCG(seed, 2)),
		byID:  map[string]*chaosMsg{},
	}
}

// add makes the next message of chat.
func (w *chaosWorkload) add(chat int) *chaosMsg {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.next[chat]++
	m := &chaosMsg{id: fmt.Sprintf("c%02dm%03d", chat, w.next[chat]), chat: chat}
	switch w.rng.IntN(4) {
	case 2:
		m.kind = answerTool
	case 3:
		m.kind = answerSend
	}
	w.msgs = append(w.msgs, m)
	w.byID[m.id] = m
	return m
}

// batch makes a cycle's new messages, for random chats.
func (w *chaosWorkload) batch() []*chaosMsg {
	n := 1 + w.rng.IntN(chaosMaxPerCycle)
	out := make([]*chaosMsg, n)
	for i := range out {
		out[i] = w.add(w.rng.IntN(chaosChats))
	}
	return out
}

func (w *chaosWorkload) msg(id string) *chaosMsg {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.byID[id]
}

func (w *chaosWorkload) all() []*chaosMsg {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.msgs)
}

// chaosModel answers every request from the workload, by the id in its
// newest user message.
type chaosModel struct {
	w       *chaosWorkload
	current atomic.Pointer[chaosCycle]
	// reasked counts requests that end with the model's own final answer:
	// a turn resumed after its final text was stored asks the model again.
	reasked atomic.Int32
	errs    chan string // requests the script could not answer

	mu    sync.Mutex
	asked map[string]bool // the messages the model was asked about
}

func newChaosModel(fake *testkit.FakeLLM, w *chaosWorkload) *chaosModel {
	m := &chaosModel{w: w, errs: make(chan string, 100), asked: map[string]bool{}}
	fake.SetDefault(&testkit.Reply{Func: m.reply})
	return m
}

func (m *chaosModel) reply(r testkit.Recorded) testkit.Reply {
	c := m.current.Load()
	last := -1
	for i, msg := range r.Messages {
		if msg.Role == llm.RoleUser {
			last = i
		}
	}
	var msg *chaosMsg
	if last >= 0 {
		msg = m.w.msg(chaosIDRe.FindString(r.Messages[last].Content))
	}
	if msg == nil {
		c.event(evModelCall)
		err := fmt.Sprintf("chaos: no message id in the newest user message of a request: %+v", r.Messages)
		select {
		case m.errs <- err:
		default:
		}
		return testkit.Reply{Status: http.StatusInternalServerError, ErrorMessage: err}
	}
	m.mu.Lock()
	m.asked[msg.id] = true
	m.mu.Unlock()
	if c != nil {
		c.mu.Lock()
		c.armIfAskedLocked(m.wasAsked)
		c.mu.Unlock()
	}
	c.event(evModelCall)
	after := r.Messages[last+1:]
	if n := len(after); n > 0 && after[n-1].Role == llm.RoleAssistant && len(after[n-1].ToolCalls) == 0 {
		m.reasked.Add(1)
	}
	toolDone := slices.ContainsFunc(after, func(msg llm.Message) bool { return msg.Role == llm.RoleTool })
	m.w.mu.Lock()
	delay := time.Duration(m.w.delay.IntN(25)) * time.Millisecond
	m.w.mu.Unlock()
	switch {
	case msg.kind == answerText, msg.kind == answerTool && toolDone:
		return testkit.Reply{Text: chaosAnswer(msg.id), Delay: delay}
	case toolDone:
		return testkit.Reply{Text: chaosNeverSent(msg.id), Delay: delay}
	case msg.kind == answerTool:
		return testkit.Reply{ToolCalls: []llm.ToolCall{testkit.Call("time-"+msg.id, "current_time", `{}`)}, Delay: delay}
	default:
		args, _ := json.Marshal(map[string]string{"text": chaosAnswer(msg.id)})
		return testkit.Reply{ToolCalls: []llm.ToolCall{testkit.Call("send-"+msg.id, "send_message", string(args))}, Delay: delay}
	}
}

// wasAsked reports whether the model was asked about message id.
func (m *chaosModel) wasAsked(id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.asked[id]
}

// chaosReply is a message the bot sent, as the platform recorded it.
type chaosReply struct {
	chatKey, text, platformID string
}

// tapCall is what the tap makes of a call.
type tapCall struct {
	send    bool // posts a message to a chat
	updates bool // Telegram getUpdates
	confirm bool // Telegram getUpdates with a higher offset than any before
	ready   bool // Discord: a call the adapter makes once its gateway session is READY; Slack: apps.connections.open
	// webhook: the platform posts to the child (WhatsApp): the tap
	// forwards the call to the child at to; answered 2xx, it is the
	// inbound event and the child's first poll.
	webhook bool
	to      string
}

// chaosChannel is what the test needs of a platform.
type chaosChannel interface {
	name() string
	events() []chaosEvent                        // the kill points it offers
	upstream() string                            // the fake's base URL, for the tap
	config(tapURL string) func(*config.Channels) // sets the channel in channels
	classify(r *http.Request, body []byte) tapCall
	sentID(answer []byte) string       // the platform's id of a sent message, from the answer
	handedOver(answer []byte) []string // the ids of the updates a getUpdates answer hands over
	// post makes the platform deliver msgs to the cycle's child and returns
	// how many it posted (Discord waits for the gateway session first; a
	// child killed before it identified gets none).
	post(ctx context.Context, c *chaosCycle, msgs []*chaosMsg) int
	// settle waits, after a kill, until the platform has let go of the
	// dead child (Discord: its gateway session is no longer live).
	settle(ctx context.Context) error
	replies() []chaosReply
	waitReplies(ctx context.Context, done func([]chaosReply) bool) error
	// armLate: a kill point other than a timer or an inbound event counts
	// its events only once the cycle's messages are stored. A Discord
	// message in flight at a kill waits for the next child's catch-up; the
	// inbound kill point covers that window, and the others then cover
	// theirs with the cycle's messages in play.
	armLate() bool
	// exactlyOnce: no duplicate at all is allowed. Else a duplicate must
	// be explained by the window no idempotency key closes (Telegram).
	exactlyOnce() bool
	// warmUp: before the first kill, a clean run answers one message in
	// every chat (Discord: a restarted child catches up only in chats it
	// has stored a message of).
	warmUp() bool
	check(t *testing.T) // platform-specific checks at the end
	secrets() []string
}

// startCycle tells a channel with taps of its own (email: SMTP) that
// cycle c starts, before its configuration is written.
func startCycle(ch chaosChannel, c *chaosCycle, rec *chaosRecord, delays *chaosDelays) {
	if s, ok := ch.(interface {
		cycleStarts(*chaosCycle, *chaosRecord, *chaosDelays)
	}); ok {
		s.cycleStarts(c, rec, delays)
	}
}

// chaosRecord is what the taps saw across the run.
type chaosRecord struct {
	mu       sync.Mutex
	sentBy   map[string]int  // platform message id → the cycle whose child sent it
	gotFirst map[string]int  // Telegram update id → the first cycle whose child got it
	again    map[string]bool // Telegram update ids handed again to a later child
}

func newChaosRecord() *chaosRecord {
	return &chaosRecord{sentBy: map[string]int{}, gotFirst: map[string]int{}, again: map[string]bool{}}
}

// handed records the updates a poll of cycle n's child got.
func (r *chaosRecord) handed(n int, ids []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, id := range ids {
		if first, ok := r.gotFirst[id]; !ok {
			r.gotFirst[id] = n
		} else if first != n {
			r.again[id] = true
		}
	}
}

// chaosDelays draws the delays of the sends, from the seed: the order of
// the draws follows the order of the sends, so a replay is close, not
// exact.
type chaosDelays struct {
	most time.Duration
	mu   sync.Mutex
	rng  *rand.Rand
}

func (d *chaosDelays) draw() time.Duration {
	if d.most <= 0 {
		return 0
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return time.Duration(d.rng.Int64N(int64(d.most) + 1))
}

// chaosTap forwards one child's calls to a fake platform, delays each send
// on both sides of the platform, and fires the cycle's kill points at the
// exact moment.
type chaosTap struct {
	*httptest.Server
	ch     chaosChannel
	cycle  *chaosCycle
	rec    *chaosRecord
	delays *chaosDelays
}

func newChaosTap(ch chaosChannel, c *chaosCycle, rec *chaosRecord, delays *chaosDelays) *chaosTap {
	p := &chaosTap{ch: ch, cycle: c, rec: rec, delays: delays}
	p.Server = httptest.NewServer(p)
	return p
}

// hold delays a send by a drawn time, as a slow network would: a fault
// injected, not a wait for something. It returns false, at once, if the
// child dies meanwhile.
func (p *chaosTap) hold() bool {
	timer := time.NewTimer(p.delays.draw())
	defer timer.Stop()
	select {
	case <-timer.C:
		return !p.cycle.dead()
	case <-p.cycle.killed:
		return false
	}
}

func (p *chaosTap) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	call := p.ch.classify(r, body)
	if call.updates || call.ready {
		p.cycle.first(&p.cycle.polled)
	}
	if call.ready {
		p.cycle.markReady()
	}
	if call.confirm {
		p.cycle.event(evConfirm)
	}
	if call.send && !p.hold() {
		panic(http.ErrAbortHandler) // the process died while its send was on the way
	}
	if p.cycle.dead() {
		panic(http.ErrAbortHandler) // the process died before its request went out
	}
	upstream := p.ch.upstream()
	if call.webhook {
		upstream = call.to
	}
	resp, answer := forwardTo(r, body, upstream, call.send)
	sent := ""
	if call.send && resp.StatusCode == http.StatusOK {
		if sent = p.ch.sentID(answer); sent != "" {
			p.cycle.first(&p.cycle.answered)
			p.rec.mu.Lock()
			p.rec.sentBy[sent] = p.cycle.n
			p.rec.mu.Unlock()
			p.cycle.event(evSendAccepted)
		}
	}
	if call.send && !p.hold() {
		panic(http.ErrAbortHandler) // the answer is on its way back to a dead process
	}
	if p.cycle.dead() {
		panic(http.ErrAbortHandler)
	}
	answerWith(w, resp, answer)
	_ = http.NewResponseController(w).Flush()
	if sent != "" {
		p.cycle.event(evSendAnswered)
	}
	if call.webhook && resp.StatusCode/100 == 2 {
		p.cycle.first(&p.cycle.polled)
		p.cycle.event(evInbound)
	}
	if call.updates {
		if ids := p.ch.handedOver(answer); len(ids) > 0 {
			p.rec.handed(p.cycle.n, ids)
			p.cycle.event(evInbound)
		}
	}
}

// chaosConfig is serve's configuration: the fake model, the database, and
// channel (which sets the channels).
func chaosConfig(model *testkit.FakeLLM, dir string, channel func(*config.Channels)) *config.Config {
	cfg := modelConfig(model.URL)
	cfg.Store.Path = filepath.Join(dir, "switchboard.db")
	cfg.Skills.Dir = filepath.Join(dir, "skills")
	cfg.Agent.MaxConcurrentTurns = 6
	cfg.Learning.Enabled = false
	cfg.HTTP.Listen = ""
	cfg.Log.Level = "debug"
	channel(&cfg.Channels)
	return cfg
}

// chaosConfigFor is chaosConfig for ch's child behind the tap at tapURL; a
// platform that posts to the child (a webhook) has it serve http.listen.
func chaosConfigFor(ch chaosChannel, model *testkit.FakeLLM, dir, tapURL string) *config.Config {
	cfg := chaosConfig(model, dir, ch.config(tapURL))
	if l, ok := ch.(interface{ listen() string }); ok {
		cfg.HTTP.Listen = l.listen()
	}
	return cfg
}

// runChaos runs the cycles, the final clean run, and the checks.
func runChaos(t *testing.T, ch chaosChannel, run chaosRun) {
	seed, cycles := run.seed, run.cycles
	start := time.Now()
	ctx := t.Context()
	w := newChaosWorkload(seed)
	rng := rand.New(rand.NewPCG(seed, 3))
	fake := testkit.NewFakeLLM(t)
	model := newChaosModel(fake, w)
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "serve.yaml")
	rig := &crashRig{cfg: cfgPath}
	rec := newChaosRecord()
	delays := &chaosDelays{most: run.sendDelay, rng: rand.New(rand.NewPCG(seed, 4))}
	var ran []*chaosCycle // every cycle so far, the clean run last
	t.Cleanup(func() {
		for _, c := range rig.children {
			c.kill()
		}
		if t.Failed() {
			reportChaos(t, rig, ran)
			t.Logf("replay with: go test -race -run 'TestChaos/%s' ./e2e/ %s", ch.name(), run.flags())
		}
	})

	// cleanRun runs child n to the end: it posts backlog and one new
	// message per chat, waits until each chat's last is answered (then so
	// is everything before it: a chat's messages run in order, the ones a
	// crash left unfinished first), and stops the child with SIGTERM.
	cleanRun := func(n int, backlog []*chaosMsg) {
		c := newChaosCycle(n, killPlan{event: numChaosEvents})
		ran = append(ran, c)
		tap := newChaosTap(ch, c, rec, delays)
		startCycle(ch, c, rec, delays)
		defer func() {
			c.kill("the test ended") // if a check stopped the test before the child
			tap.Close()
		}()
		writeChaosConfig(t, cfgPath, chaosConfigFor(ch, fake, dir, tap.URL))
		model.current.Store(c)
		child := c.start(t, rig)
		last := map[string]bool{}
		for chat := range chaosChats {
			m := w.add(chat)
			backlog = append(backlog, m)
			last[m.id] = true
		}
		if got := ch.post(ctx, c, backlog); got != len(backlog) {
			t.Fatalf("%s posted %d of %d messages", c, got, len(backlog))
		}
		wctx, cancel := context.WithTimeout(ctx, 2*e2eWait)
		defer cancel()
		err := ch.waitReplies(wctx, func(rs []chaosReply) bool {
			answered := map[string]bool{}
			for _, r := range rs {
				if m := chaosAnswerRe.FindStringSubmatch(r.text); m != nil {
					answered[m[1]] = true
				}
			}
			for id := range last {
				if !answered[id] {
					return false
				}
			}
			return true
		})
		if err != nil {
			t.Fatalf("%s did not answer every chat's last message: %v\nstderr:\n%s", c, err, child.stderr.String())
		}
		child.stop(t)
		checkChaosChild(t, c, child)
		for _, s := range ch.secrets() {
			if strings.Contains(child.stderr.String(), s) {
				t.Errorf("a secret appears in the log of %s", c)
			}
		}
	}

	first := 0 // the number of the warm-up run, if any
	if ch.warmUp() {
		first = 1
		cleanRun(first, nil)
	}
	var backlog []*chaosMsg   // drawn but not posted yet (Discord: killed before it identified)
	var checks sync.WaitGroup // integrity checks of the database after each kill
	defer checks.Wait()
	fallbacks := 0
	for n := first + 1; n <= first+cycles; n++ {
		c := newChaosCycle(n, pickKill(rng, ch.events(), ch.armLate()))
		ran = append(ran, c)
		tap := newChaosTap(ch, c, rec, delays)
		startCycle(ch, c, rec, delays)
		writeChaosConfig(t, cfgPath, chaosConfigFor(ch, fake, dir, tap.URL))
		backlog = append(backlog, w.batch()...)
		c.armed.Store(!ch.armLate() || c.plan.event == evTimer || c.plan.event == evInbound)
		model.current.Store(c)
		child := c.start(t, rig)
		posted := ch.post(ctx, c, backlog)
		c.armWhenAsked(backlog[:posted], model.wasAsked)
		backlog = backlog[posted:]

		timer := time.NewTimer(chaosFallback)
		select {
		case <-c.killed:
		case <-timer.C:
			fallbacks++
			c.kill(fmt.Sprintf("fallback after %s", chaosFallback))
		case <-ctx.Done():
			t.Fatalf("cycle %d: %v", n, ctx.Err())
		}
		timer.Stop()
		tap.Close() // waits for the calls in flight: none from this child comes later
		child.crash(t)
		if err := ch.settle(waitCtx(t)); err != nil {
			t.Fatalf("after kill %d: %v", n, err)
		}
		checkChaosChild(t, c, child)
		snap := snapshotDB(t, dir, n)
		checks.Go(func() {
			checkIntegrity(t, snap, fmt.Sprintf("the database after kill %d", n))
			_ = os.RemoveAll(filepath.Dir(snap))
		})
		if testing.Verbose() {
			t.Log(c)
		}
	}

	// The clean run, after the last kill.
	cleanRun(first+cycles+1, backlog)
	for len(model.errs) > 0 {
		t.Error(<-model.errs)
	}

	checks.Wait()
	checkIntegrity(t, filepath.Join(dir, "switchboard.db"), "the database after the clean run")
	db := openChaosDB(t, filepath.Join(dir, "switchboard.db"))
	out := checkChaosAnswers(t, ch, w, rec, db, ran)
	ch.check(t)
	caughtUp := 0 // Discord: messages a child fetched and delivered on READY
	for _, c := range rig.children {
		for _, m := range chaosCaughtUpRe.FindAllStringSubmatch(c.stderr.String(), -1) {
			k, _ := strconv.Atoi(m[1])
			caughtUp += k
		}
	}
	rec.mu.Lock()
	redelivered := len(rec.again)
	rec.mu.Unlock()
	if r, ok := ch.(interface{ redelivered() int }); ok {
		redelivered = r.redelivered()
	}
	res := chaosResult{
		Channel: ch.name(), Seed: seed, SendDelayMaxMS: run.sendDelay.Milliseconds(),
		Kills: cycles, Fallbacks: fallbacks, KillPoints: map[string]int{},
		Messages: len(w.all()), Lost: out.lost, Doubled: out.doubled, ExtraCopies: out.extra, MostCopies: max(out.most, 1),
		Redelivered: redelivered, CaughtUp: caughtUp,
		ModelRequests: fake.Calls(), Resumed: int(model.reasked.Load()),
		Seconds: time.Since(start).Seconds(),
	}
	if res.Messages > 0 {
		res.DoubledPct = 100 * float64(res.Doubled) / float64(res.Messages)
	}
	var toAnswer, toPoll []time.Duration
	for i, c := range ran {
		if c.plan.event < numChaosEvents {
			res.KillPoints[chaosEventNames[c.plan.event]]++
		}
		if i == 0 || ran[i-1].plan.event >= numChaosEvents {
			continue // not a restart after a kill
		}
		if d, ok := c.since(&c.answered); ok {
			toAnswer = append(toAnswer, d)
		} else {
			res.RestartToAnswer.None++
		}
		if d, ok := c.since(&c.polled); ok {
			toPoll = append(toPoll, d)
		} else {
			res.RestartToPoll.None++
		}
	}
	res.RestartToAnswer.summarize(toAnswer)
	res.RestartToPoll.summarize(toPoll)
	t.Log(res)
	line, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("chaos-result %s", line)
}

// chaosResult is a channel's figures at the end of a run. The test logs
// them as a sentence and as one line of JSON after "chaos-result ".
type chaosResult struct {
	Channel        string         `json:"channel"`
	Seed           uint64         `json:"seed"`
	SendDelayMaxMS int64          `json:"send_delay_max_ms"` // each side of a send
	Kills          int            `json:"kills"`             // SIGKILLs, one per cycle
	Fallbacks      int            `json:"fallbacks"`         // kill points that did not come: killed by chaosFallback
	KillPoints     map[string]int `json:"kill_points"`       // kills by planned kill point (fallbacks included)
	Messages       int            `json:"messages"`
	Lost           int            `json:"lost"`         // messages never answered (the test fails on any)
	Doubled        int            `json:"doubled"`      // messages answered more than once
	DoubledPct     float64        `json:"doubled_pct"`  // of the messages
	ExtraCopies    int            `json:"extra_copies"` // answers sent beyond the first
	MostCopies     int            `json:"most_copies"`  // the most answers one message got
	// Redelivered: Telegram updates handed again to a later child because
	// the one that got them died before a later getUpdates confirmed them;
	// Slack: user messages whose envelope was sent more than once (not
	// acknowledged in time, or to a child that died before acknowledging);
	// WhatsApp: user messages whose webhook delivery was posted more than
	// once (no child up, or one that died before answering 200); Matrix:
	// user messages a /sync answer handed again to a later child.
	Redelivered int `json:"redelivered_updates"`
	// CaughtUp: Discord messages a child fetched over REST when READY.
	CaughtUp      int     `json:"caught_up"`
	ModelRequests int     `json:"model_requests"`
	Resumed       int     `json:"resumed_after_final"` // requests that resumed a turn whose final answer was stored
	Seconds       float64 `json:"seconds"`
	// RestartToAnswer: for each child started after a kill, from its start
	// to the first reply of it the platform accepted. None counts the
	// children killed before they sent any.
	RestartToAnswer chaosLatency `json:"restart_to_answer"`
	// RestartToPoll: from the start to the first getUpdates (Telegram) or
	// to the READY session (Discord: the commands registered on it) or to
	// apps.connections.open (Slack) or to the first webhook delivery it
	// answered 200 (WhatsApp).
	RestartToPoll chaosLatency `json:"restart_to_poll"`
}

func (r chaosResult) String() string {
	return fmt.Sprintf("%s: %d kills (%d kill points fell back to a timer; %v), %d messages in %d chats: %d lost, %d doubled (%.2f%%, %d extra copies, at most %d of one), "+
		"%d updates or envelopes redelivered, %d messages delivered by a catch-up; restart to answer %s; restart to first poll or READY %s; "+
		"%d model requests (%d resumed after the final answer was stored); sends delayed up to %d ms each way; in %.1f s",
		r.Channel, r.Kills, r.Fallbacks, r.KillPoints, r.Messages, chaosChats, r.Lost, r.Doubled, r.DoubledPct, r.ExtraCopies, r.MostCopies,
		r.Redelivered, r.CaughtUp, r.RestartToAnswer, r.RestartToPoll, r.ModelRequests, r.Resumed, r.SendDelayMaxMS, r.Seconds)
}

// chaosLatency summarizes times measured after each restart.
type chaosLatency struct {
	N        int     `json:"n"`    // restarts measured
	None     int     `json:"none"` // restarts whose child was killed before the moment came
	MedianMS float64 `json:"median_ms"`
	P95MS    float64 `json:"p95_ms"`
	MaxMS    float64 `json:"max_ms"`
}

// summarize sets the figures of ds (nearest rank).
func (l *chaosLatency) summarize(ds []time.Duration) {
	l.N = len(ds)
	if l.N == 0 {
		return
	}
	slices.Sort(ds)
	rank := func(q float64) float64 {
		i := max(int(math.Ceil(q*float64(l.N)))-1, 0)
		return float64(ds[i].Microseconds()) / 1000
	}
	l.MedianMS, l.P95MS, l.MaxMS = rank(0.5), rank(0.95), rank(1)
}

func (l chaosLatency) String() string {
	return fmt.Sprintf("median %.0f ms, p95 %.0f ms, max %.0f ms (%d restarts, %d killed before)", l.MedianMS, l.P95MS, l.MaxMS, l.N, l.None)
}

func writeChaosConfig(t *testing.T, path string, cfg *config.Config) {
	t.Helper()
	if err := cfgfile.WriteFile(path, cfg); err != nil {
		t.Fatal(err)
	}
}

// checkChaosChild checks a child's log for what no crash excuses.
func checkChaosChild(t *testing.T, c *chaosCycle, child *crashChild) {
	t.Helper()
	logs := child.stderr.String()
	for _, bad := range []string{"WARNING: DATA RACE", "panic:", "database disk image is malformed"} {
		if strings.Contains(logs, bad) {
			t.Errorf("%s: the log holds %q:\n%s", c, bad, logs)
		}
	}
}

// chaosOutcome counts what became of the messages.
type chaosOutcome struct {
	lost    int // posted and never answered
	doubled int // answered more than once
	extra   int // answers beyond the first
	most    int // the most answers one message got
}

// deliveryKey is what the delivery record of the reply the platform
// knows as id holds: id, or what the channel says (email: the Message-ID
// of the mail Postfix queued as id).
func deliveryKey(ch chaosChannel, id string) string {
	if k, ok := ch.(interface{ deliveryKey(string) string }); ok {
		return k.deliveryKey(id)
	}
	return id
}

// checkChaosAnswers checks every message against the replies and the
// store, and counts the lost and doubled answers.
func checkChaosAnswers(t *testing.T, ch chaosChannel, w *chaosWorkload, rec *chaosRecord, db *sql.DB, ran []*chaosCycle) (out chaosOutcome) {
	t.Helper()
	cycles := len(ran) - 1 // the last is the clean run
	msgs := w.all()
	stored := map[[2]string]string{} // chat key and message id → inbox status
	rows := queryChaos(t, db, `SELECT chat_key, message_id, status FROM inbox WHERE channel = ?`, ch.name())
	for _, r := range rows {
		stored[[2]string{r[0], r[1]}] = r[2]
	}
	recorded := map[string]bool{} // platform message ids with a delivery record
	for _, r := range queryChaos(t, db, `SELECT platform_msg_id FROM deliveries`) {
		recorded[r[0]] = true
	}
	if running := queryChaos(t, db, `SELECT id, inbox_id FROM turns WHERE status = 'running'`); len(running) > 0 {
		t.Errorf("turns still running after the clean run: %v", running)
	}
	if len(stored) > len(msgs) {
		t.Errorf("the inbox holds %d %s messages, more than the %d posted", len(stored), ch.name(), len(msgs))
	}

	copies := map[string][]chaosReply{}
	perChat := map[string][]string{} // chat key → the ids answered, in order, consecutive repeats folded
	for _, r := range ch.replies() {
		m := chaosAnswerRe.FindStringSubmatch(r.text)
		if m == nil && strings.HasPrefix(r.text, chaosBusyNotice) {
			continue // a loaded machine: a message waited in line past router.QueueNoticeAfter
		}
		if m == nil {
			if id := chaosIDRe.FindString(r.text); id != "" && r.text == chaosNeverSent(id) {
				t.Errorf("message %s: the final text was sent after send_message had answered (never both)", id)
			} else {
				t.Errorf("the bot sent %q to chat %s, which answers no message", r.text, r.chatKey)
			}
			continue
		}
		copies[m[1]] = append(copies[m[1]], r)
		if ids := perChat[r.chatKey]; len(ids) == 0 || ids[len(ids)-1] != m[1] {
			perChat[r.chatKey] = append(ids, m[1])
		}
	}
	rec.mu.Lock()
	sentBy := maps.Clone(rec.sentBy)
	rec.mu.Unlock()
	by := func(r chaosReply) string {
		n, ok := sentBy[r.platformID]
		if !ok {
			return "a child the taps did not see"
		}
		return ran[n-1].String()
	}

	wantOrder := map[string][]string{}
	for _, m := range msgs {
		if m.cycle == 0 {
			t.Errorf("message %s was never posted", m.id)
			continue
		}
		status, ok := stored[[2]string{m.chatKey, m.platformID}]
		cs := copies[m.id]
		switch {
		case !ok:
			rec.mu.Lock()
			got, handed := rec.gotFirst[m.platformID]
			rec.mu.Unlock()
			how := "no poll's answer held it"
			if handed {
				how = fmt.Sprintf("first handed to child %d", got)
			}
			t.Errorf("message %s (posted in cycle %d) never reached the store (%s)", m.id, m.cycle, how)
			if len(cs) == 0 {
				out.lost++
			}
			continue
		case status != "done":
			t.Errorf("message %s: inbox status %q after the clean run, want done", m.id, status)
		}
		wantOrder[m.chatKey] = append(wantOrder[m.chatKey], m.id)
		if len(cs) == 0 {
			t.Errorf("message %s (posted in cycle %d, stored) was never answered", m.id, m.cycle)
			out.lost++
			continue
		}
		for _, c := range cs {
			if c.chatKey != m.chatKey {
				t.Errorf("message %s of chat %s was answered in chat %s", m.id, m.chatKey, c.chatKey)
			}
		}
		if !recorded[deliveryKey(ch, cs[len(cs)-1].platformID)] {
			t.Errorf("message %s: its answer (sent by %s) has no delivery record", m.id, by(cs[len(cs)-1]))
		}
		if len(cs) == 1 {
			continue
		}
		out.doubled++
		out.extra += len(cs) - 1
		out.most = max(out.most, len(cs))
		if ch.exactlyOnce() {
			var b strings.Builder
			for i, c := range cs {
				fmt.Fprintf(&b, "\n\tcopy %d: platform id %s, sent by %s, delivery recorded: %v", i+1, c.platformID, by(c), recorded[c.platformID])
			}
			t.Errorf("message %s was answered %d times:%s", m.id, len(cs), b.String())
			continue
		}
		// The Bot API has no idempotency key: if the process dies after
		// Telegram accepted sendMessage and before the delivery record
		// commits, the restarted one finds no delivery, resumes the turn
		// and sends again. So each copy but the last must (1) have no
		// delivery record — the router finishes a message that has one
		// without a new turn, so a recorded copy followed by another is a
		// bug; (2) come from a child that was killed — the clean run's
		// sends are all recorded; and (3) be followed by a copy from a later
		// child — one process never sends an answer twice. (1) and (2) put
		// the kill after the Bot API accepted the copy and before its
		// record committed: exactly that window.
		for i, c := range cs[:len(cs)-1] {
			n, seen := sentBy[c.platformID]
			next := sentBy[cs[i+1].platformID]
			switch {
			case !seen:
				t.Errorf("message %s: copy %d (platform id %s) went through no tap", m.id, i+1, c.platformID)
			case recorded[c.platformID]:
				t.Errorf("message %s: copy %d (by child %d) has a delivery record, yet was sent again by child %d", m.id, i+1, n, next)
			case n > cycles:
				t.Errorf("message %s: copy %d was sent by the clean run and not recorded", m.id, i+1)
			case next <= n:
				t.Errorf("message %s: child %d sent it again (copy %d by child %d)", m.id, next, i+1, n)
			default:
				t.Logf("message %s: copy %d sent by %s, unrecorded; sent again by child %d", m.id, i+1, ran[n-1], next)
			}
		}
	}
	for chat, want := range wantOrder {
		if got := perChat[chat]; !slices.Equal(got, want) {
			t.Errorf("chat %s: answers in the order %v, want %v", chat, got, want)
		}
	}
	return out
}

func openChaosDB(t *testing.T, file string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+file+"?_busy_timeout=5000")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// queryChaos returns the rows of a query, as text.
func queryChaos(t *testing.T, db *sql.DB, query string, args ...any) [][]string {
	t.Helper()
	rows, err := queryRows(t.Context(), db, query, args...)
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

func queryRows(ctx context.Context, db *sql.DB, query string, args ...any) ([][]string, error) {
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", query, err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", query, err)
	}
	var out [][]string
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, fmt.Errorf("%s: %w", query, err)
		}
		row := make([]string, len(cols))
		for i, v := range vals {
			row[i] = v.String
		}
		out = append(out, row)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", query, err)
	}
	return out, nil
}

// checkIntegrity runs PRAGMA integrity_check and foreign_key_check on the
// database in file. It only reports with t.Errorf, so it may run in a
// goroutine of its own.
func checkIntegrity(t *testing.T, file, what string) {
	db, err := sql.Open("sqlite3", "file:"+file+"?_busy_timeout=5000")
	if err != nil {
		t.Errorf("%s: %v", what, err)
		return
	}
	defer db.Close()
	if got, err := queryRows(t.Context(), db, `PRAGMA integrity_check`); err != nil || len(got) != 1 || got[0][0] != "ok" {
		t.Errorf("%s: integrity_check = %v (%v), want ok", what, got, err)
	}
	if got, err := queryRows(t.Context(), db, `PRAGMA foreign_key_check`); err != nil || len(got) > 0 {
		t.Errorf("%s: foreign_key_check = %v (%v), want nothing", what, got, err)
	}
}

// snapshotDB copies the database files as kill n left them, so that they
// can be checked while the next child recovers the originals (their WAL)
// itself.
func snapshotDB(t *testing.T, dir string, n int) string {
	t.Helper()
	snap := filepath.Join(dir, fmt.Sprintf("after-kill-%d", n))
	if err := os.Mkdir(snap, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, suffix := range []string{"", "-wal", "-shm"} {
		b, err := os.ReadFile(filepath.Join(dir, "switchboard.db"+suffix))
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(snap, "switchboard.db"+suffix), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(snap, "switchboard.db")
}

// reportChaos logs, after a failure, how each child ended, the warnings and
// errors of all, and the whole log of the last two.
func reportChaos(t *testing.T, rig *crashRig, cycles []*chaosCycle) {
	for i, c := range cycles {
		if i >= len(rig.children) {
			break
		}
		logs := rig.children[i].stderr.String()
		if i >= len(cycles)-2 {
			t.Logf("%s; log:\n%s", c, logs)
			continue
		}
		var b strings.Builder
		for line := range strings.Lines(logs) {
			if strings.Contains(line, "level=ERROR") || strings.Contains(line, "level=WARN") {
				b.WriteString(line)
			}
		}
		t.Logf("%s; warnings and errors:\n%s", c, b.String())
	}
}

// ---- Telegram ----

type telegramChaos struct {
	tg *tgfake.Fake
	// maxOffset is the highest offset a poll carried (under mu).
	mu        sync.Mutex
	maxOffset int
}

func newTelegramChaos(t *testing.T) *telegramChaos {
	return &telegramChaos{tg: tgfake.New(t, tgToken)}
}

func (c *telegramChaos) name() string { return "telegram" }

func (c *telegramChaos) events() []chaosEvent {
	return []chaosEvent{evTimer, evModelCall, evSendAccepted, evSendAnswered, evInbound, evConfirm}
}

func (c *telegramChaos) upstream() string { return c.tg.URL }

func chaosTelegramUser(chat int) int64 { return 6001 + int64(chat) }

func (c *telegramChaos) config(tapURL string) func(*config.Channels) {
	ids := make([]int64, chaosChats)
	for i := range ids {
		ids[i] = chaosTelegramUser(i)
	}
	// A long poll: a killed child's poll ends with its connection.
	return func(ch *config.Channels) {
		tes := channels.SectionOf[*telegram.Config](ch.Sections)
		tes.Enabled, tes.Token, tes.APIEndpoint = true, tgToken, tapURL
		tes.PollTimeout, tes.AllowUsers = 30*time.Second, userIDs(ids...)
	}
}

func (c *telegramChaos) classify(r *http.Request, body []byte) tapCall {
	switch strings.ToLower(path.Base(r.URL.Path)) {
	case "sendmessage":
		return tapCall{send: true}
	case "getupdates":
		form, _ := url.ParseQuery(string(body))
		offset, _ := strconv.Atoi(form.Get("offset"))
		c.mu.Lock()
		defer c.mu.Unlock()
		confirm := offset > c.maxOffset
		c.maxOffset = max(c.maxOffset, offset)
		return tapCall{updates: true, confirm: confirm}
	}
	return tapCall{}
}

func (c *telegramChaos) sentID(answer []byte) string {
	var a struct {
		OK     bool `json:"ok"`
		Result struct {
			MessageID int `json:"message_id"`
		} `json:"result"`
	}
	if json.Unmarshal(answer, &a) != nil || !a.OK || a.Result.MessageID == 0 {
		return ""
	}
	return strconv.Itoa(a.Result.MessageID)
}

func (c *telegramChaos) handedOver(answer []byte) []string {
	var a struct {
		Result []struct {
			UpdateID int `json:"update_id"`
		} `json:"result"`
	}
	if json.Unmarshal(answer, &a) != nil {
		return nil
	}
	ids := make([]string, len(a.Result))
	for i, u := range a.Result {
		ids[i] = strconv.Itoa(u.UpdateID)
	}
	return ids
}

// post queues the messages at the Bot API: the child polls them.
func (c *telegramChaos) post(_ context.Context, cyc *chaosCycle, msgs []*chaosMsg) int {
	for _, m := range msgs {
		user := chaosTelegramUser(m.chat)
		_, id := c.tg.PushText(user, user, fmt.Sprintf("user%02d", m.chat), "question "+m.id)
		m.cycle, m.chatKey, m.platformID = cyc.n, strconv.FormatInt(user, 10), strconv.Itoa(id)
	}
	return len(msgs)
}

func (c *telegramChaos) settle(context.Context) error { return nil }

func (c *telegramChaos) replies() []chaosReply {
	var out []chaosReply
	for _, s := range c.tg.Sent() {
		out = append(out, chaosReply{chatKey: strconv.FormatInt(s.ChatID, 10), text: s.Text, platformID: strconv.Itoa(s.MessageID)})
	}
	return out
}

func (c *telegramChaos) waitReplies(ctx context.Context, done func([]chaosReply) bool) error {
	for {
		n := len(c.tg.Sent())
		if done(c.replies()) {
			return nil
		}
		if _, err := c.tg.WaitSent(ctx, n+1); err != nil {
			return err
		}
	}
}

func (c *telegramChaos) armLate() bool     { return false }
func (c *telegramChaos) exactlyOnce() bool { return false }
func (c *telegramChaos) warmUp() bool      { return false }
func (c *telegramChaos) secrets() []string { return []string{tgToken, e2eAPIKey} }

// check: the clean run confirmed every update at its SIGTERM stop.
func (c *telegramChaos) check(t *testing.T) {
	if n := c.tg.Pending(); n != 0 {
		t.Errorf("%d update(s) still unconfirmed after the clean run", n)
	}
}

// ---- Discord ----

type discordChaos struct {
	dc    *discordfake.Fake
	chats [chaosChats]string // DM channel ids
}

func newDiscordChaos(t *testing.T) *discordChaos {
	c := &discordChaos{dc: discordfake.New(t)}
	for i := range c.chats {
		c.chats[i] = c.dc.NewID()
		c.dc.AddChannel(c.chats[i], discordfake.ChannelTypeDM, "", "")
	}
	return c
}

func (c *discordChaos) name() string { return "discord" }

func (c *discordChaos) events() []chaosEvent {
	return []chaosEvent{evTimer, evModelCall, evSendAccepted, evSendAnswered, evInbound}
}

func (c *discordChaos) upstream() string { return c.dc.URL }

func chaosDiscordUser(chat int) string { return fmt.Sprintf("3200000000000000%02d", chat) }

func (c *discordChaos) config(tapURL string) func(*config.Channels) {
	users := make([]string, chaosChats)
	for i := range users {
		users[i] = chaosDiscordUser(i)
	}
	// REST goes through the tap; the gateway straight to the fake.
	return func(ch *config.Channels) {
		dis := channels.SectionOf[*discord.Config](ch.Sections)
		dis.Enabled, dis.Token, dis.APIBase, dis.GatewayURL = true, c.dc.Token, tapURL+"/api/v9", c.dc.GatewayURL()
		dis.AllowUsers = users
	}
}

var (
	discordSendPath     = regexp.MustCompile(`^/api/v9/channels/\d+/messages$`)
	discordCommandsPath = regexp.MustCompile(`^/api/v9/applications/\d+/commands$`)
)

// classify: the adapter registers its slash commands once per process, when
// its session is READY.
func (c *discordChaos) classify(r *http.Request, _ []byte) tapCall {
	return tapCall{
		send:  r.Method == http.MethodPost && discordSendPath.MatchString(r.URL.Path),
		ready: r.Method == http.MethodPut && discordCommandsPath.MatchString(r.URL.Path),
	}
}

func (c *discordChaos) sentID(answer []byte) string {
	var m struct {
		ID string `json:"id"`
	}
	if json.Unmarshal(answer, &m) != nil {
		return ""
	}
	return m.ID
}

func (c *discordChaos) handedOver([]byte) []string { return nil }

// post waits until the child has a gateway session (Discord does not keep
// events for a session yet to come), then dispatches the messages, each an
// inbound event.
func (c *discordChaos) post(ctx context.Context, cyc *chaosCycle, msgs []*chaosMsg) int {
	select {
	case <-cyc.ready:
	case <-cyc.killed:
		return 0
	case <-ctx.Done():
		return 0
	}
	for i, m := range msgs {
		if cyc.dead() {
			return i
		}
		msg := c.dc.MessageCreate(c.chats[m.chat], "", chaosDiscordUser(m.chat), fmt.Sprintf("user%02d", m.chat), "question "+m.id)
		m.cycle, m.chatKey, m.platformID = cyc.n, c.chats[m.chat], msg.ID
		c.dc.Dispatch("MESSAGE_CREATE", msg)
		cyc.event(evInbound)
	}
	return len(msgs)
}

func (c *discordChaos) settle(ctx context.Context) error {
	return c.dc.WaitFor(ctx, func() bool { return !c.dc.Connected() })
}

func (c *discordChaos) replies() []chaosReply {
	var out []chaosReply
	for _, s := range c.dc.Sent() {
		out = append(out, chaosReply{chatKey: s.ChannelID, text: s.Content, platformID: s.ID})
	}
	return out
}

func (c *discordChaos) waitReplies(ctx context.Context, done func([]chaosReply) bool) error {
	return c.dc.WaitFor(ctx, func() bool { return done(c.replies()) })
}

func (c *discordChaos) armLate() bool     { return true }
func (c *discordChaos) exactlyOnce() bool { return true }
func (c *discordChaos) warmUp() bool      { return true }
func (c *discordChaos) secrets() []string { return []string{c.dc.Token, e2eAPIKey} }
func (c *discordChaos) check(*testing.T)  {}

// The figures TestChaos reports: nearest-rank median, p95 and max.
func TestChaosLatencySummary(t *testing.T) {
	ms := func(ns ...int) []time.Duration {
		ds := make([]time.Duration, len(ns))
		for i, n := range ns {
			ds[i] = time.Duration(n) * time.Millisecond
		}
		return ds
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = 100 - i // 100 down to 1: summarize sorts
	}
	for _, tc := range []struct {
		ds   []time.Duration
		want chaosLatency
	}{
		{nil, chaosLatency{}},
		{ms(7), chaosLatency{N: 1, MedianMS: 7, P95MS: 7, MaxMS: 7}},
		{ms(30, 10, 20, 40), chaosLatency{N: 4, MedianMS: 20, P95MS: 40, MaxMS: 40}},
		{ms(hundred...), chaosLatency{N: 100, MedianMS: 50, P95MS: 95, MaxMS: 100}},
	} {
		var got chaosLatency
		got.summarize(tc.ds)
		if got != tc.want {
			t.Errorf("summarize(%v) = %+v, want %+v", tc.ds, got, tc.want)
		}
	}
}

// ---- Slack ----

type slackChaos struct {
	sl    *slackfake.Fake
	chats [chaosChats]string // DM conversation ids
}

func newSlackChaos(t *testing.T) *slackChaos {
	c := &slackChaos{sl: slackfake.New(t)}
	// Slack's limits, except apps.connections.open's tier 1 ("1+ per
	// minute", a burst of 5 in the fake): a new process every second or
	// so is far past it, and what the test measures is loss, not that wait.
	limits := slackfake.DefaultLimits
	limits.Methods = maps.Clone(limits.Methods)
	limits.Methods["apps.connections.open"] = slackfake.Rate{PerMinute: 600, Burst: 100}
	c.sl.SetLimits(limits)
	for i := range c.chats {
		c.chats[i] = fmt.Sprintf("DCHAOS%02d", i)
	}
	return c
}

func (c *slackChaos) name() string { return "slack" }

// events: a message reaches the child over Socket Mode as it is posted
// (the inbound kill point); an envelope the dead child never acknowledged
// is sent again, to the next child's connection.
func (c *slackChaos) events() []chaosEvent {
	return []chaosEvent{evTimer, evModelCall, evSendAccepted, evSendAnswered, evInbound}
}

func (c *slackChaos) upstream() string { return strings.TrimSuffix(c.sl.APIURL(), "/api/") }

func chaosSlackUser(chat int) string { return fmt.Sprintf("U0CHAOS%02d", chat) }

// config: the Web API goes through the tap; Socket Mode straight to the
// fake (apps.connections.open hands out the fake's own address).
func (c *slackChaos) config(tapURL string) func(*config.Channels) {
	users := make([]string, chaosChats)
	for i := range users {
		users[i] = chaosSlackUser(i)
	}
	return func(ch *config.Channels) {
		s := channels.SectionOf[*slack.Config](ch.Sections)
		s.Enabled, s.BotToken, s.AppToken, s.APIURL = true, slackfake.BotToken, slackfake.AppToken, tapURL+"/api/"
		s.AllowUsers = users
	}
}

// classify: apps.connections.open is the child's first call towards its
// Socket Mode connection (its "first poll").
func (c *slackChaos) classify(r *http.Request, _ []byte) tapCall {
	switch path.Base(r.URL.Path) {
	case "chat.postMessage":
		return tapCall{send: true}
	case "apps.connections.open":
		return tapCall{ready: true}
	}
	return tapCall{}
}

func (c *slackChaos) sentID(answer []byte) string {
	var a struct {
		OK bool   `json:"ok"`
		TS string `json:"ts"`
	}
	if json.Unmarshal(answer, &a) != nil || !a.OK {
		return ""
	}
	return a.TS
}

func (c *slackChaos) handedOver([]byte) []string { return nil }

// post has the users write: the fake sends each message to the child's
// connection at once, or keeps it until a connection is open.
func (c *slackChaos) post(_ context.Context, cyc *chaosCycle, msgs []*chaosMsg) int {
	for _, m := range msgs {
		ts := c.sl.Say(slackfake.UserMessage{Channel: c.chats[m.chat], User: chaosSlackUser(m.chat), Text: "question " + m.id})
		m.cycle, m.chatKey, m.platformID = cyc.n, c.chats[m.chat], ts
		cyc.event(evInbound)
	}
	return len(msgs)
}

// settle: the fake has seen the dead child's connection close, so nothing
// is sent to it any more.
func (c *slackChaos) settle(ctx context.Context) error {
	return c.sl.WaitFor(ctx, func() bool { return !c.sl.Connected() })
}

func (c *slackChaos) replies() []chaosReply {
	var out []chaosReply
	for _, ch := range c.chats {
		for _, m := range c.sl.BotMessages(ch) {
			out = append(out, chaosReply{chatKey: ch, text: m.Text, platformID: m.TS})
		}
	}
	return out
}

func (c *slackChaos) waitReplies(ctx context.Context, done func([]chaosReply) bool) error {
	return c.sl.WaitFor(ctx, func() bool { return done(c.replies()) })
}

func (c *slackChaos) armLate() bool     { return false }
func (c *slackChaos) exactlyOnce() bool { return false }
func (c *slackChaos) warmUp() bool      { return false }
func (c *slackChaos) secrets() []string {
	return []string{slackfake.BotToken, slackfake.AppToken, e2eAPIKey}
}

// redelivered counts the user messages whose envelope was sent more than
// once.
func (c *slackChaos) redelivered() int {
	bot := c.botTS()
	again := map[string]bool{}
	for _, e := range c.sl.Envelopes() {
		if e.Sent > 1 && !bot[e.TS] {
			again[e.TS] = true
		}
	}
	return len(again)
}

// botTS is the set of the bot's messages' ts.
func (c *slackChaos) botTS() map[string]bool {
	bot := map[string]bool{}
	for _, r := range c.replies() {
		bot[r.platformID] = true
	}
	return bot
}

// check: the clean run acknowledged every envelope of a user's message
// before its stop. (The echoes of the bot's own posts are not checked: the
// last may arrive while the child stops.)
func (c *slackChaos) check(t *testing.T) {
	bot := c.botTS()
	for _, e := range c.sl.Envelopes() {
		if !e.Acked && !bot[e.TS] {
			t.Errorf("envelope %s (%s about %s, sent %d times) still unacknowledged after the clean run", e.ID, e.Kind, e.TS, e.Sent)
		}
	}
}

// ---- WhatsApp ----

type whatsappChaos struct {
	wa    *wafake.Fake
	addr  string             // every child's http.listen
	users [chaosChats]string // wa_ids, one chat each
}

func newWhatsAppChaos(t *testing.T) *whatsappChaos {
	c := &whatsappChaos{wa: wafake.New(t), addr: freeLoopbackAddr(t)}
	for i := range c.users {
		c.users[i] = fmt.Sprintf("1555300%04d", i)
	}
	return c
}

// freeLoopbackAddr is a 127.0.0.1 address no one listens on now, for the
// children to listen on one after another.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

func (c *whatsappChaos) name() string   { return "whatsapp" }
func (c *whatsappChaos) listen() string { return c.addr }

// events: a message reaches the child when it answers the webhook
// delivery 200 (the inbound kill point); a delivery the dead child never
// answered is posted again, to the next child.
func (c *whatsappChaos) events() []chaosEvent {
	return []chaosEvent{evTimer, evModelCall, evSendAccepted, evSendAnswered, evInbound}
}

func (c *whatsappChaos) upstream() string { return c.wa.APIBase() }

// config: the Graph API goes through the tap, and so do the webhook's
// deliveries, on their way to the child's http.listen.
func (c *whatsappChaos) config(tapURL string) func(*config.Channels) {
	c.wa.SetWebhook(tapURL + whatsapp.DefaultWebhookPath)
	return func(ch *config.Channels) {
		s := channels.SectionOf[*whatsapp.Config](ch.Sections)
		s.Enabled, s.PhoneNumberID, s.APIBase = true, wafake.PhoneNumberID, tapURL
		s.AccessToken, s.AppSecret, s.VerifyToken = wafake.AccessToken, wafake.AppSecret, wafake.VerifyToken
		s.AllowUsers = slices.Clone(c.users[:])
	}
}

// classify: a POST to the webhook path is a delivery for the child; a
// POST to /messages other than a read receipt is a send.
func (c *whatsappChaos) classify(r *http.Request, body []byte) tapCall {
	if r.URL.Path == whatsapp.DefaultWebhookPath {
		return tapCall{webhook: true, to: "http://" + c.addr}
	}
	if r.Method == http.MethodPost && path.Base(r.URL.Path) == "messages" {
		var read struct {
			Status string `json:"status"`
		}
		if json.Unmarshal(body, &read) == nil && read.Status == "" {
			return tapCall{send: true}
		}
	}
	return tapCall{}
}

func (c *whatsappChaos) sentID(answer []byte) string {
	var a struct {
		Messages []struct {
			ID string `json:"id"`
		} `json:"messages"`
	}
	if json.Unmarshal(answer, &a) != nil || len(a.Messages) != 1 {
		return ""
	}
	return a.Messages[0].ID
}

func (c *whatsappChaos) handedOver([]byte) []string { return nil }

// post has the users write: the fake posts each message to the webhook
// until a child answers 200.
func (c *whatsappChaos) post(_ context.Context, cyc *chaosCycle, msgs []*chaosMsg) int {
	for _, m := range msgs {
		wamid, err := c.wa.Say(wafake.UserMessage{From: c.users[m.chat], Text: "question " + m.id})
		if err != nil {
			panic(err) // only a closed fake refuses
		}
		m.cycle, m.chatKey, m.platformID = cyc.n, c.users[m.chat], wamid
	}
	return len(msgs)
}

// settle: nothing holds on to a dead child; its tap is closed.
func (c *whatsappChaos) settle(context.Context) error { return nil }

func (c *whatsappChaos) replies() []chaosReply {
	var out []chaosReply
	for _, u := range c.users {
		for _, m := range c.wa.Sent(u) {
			out = append(out, chaosReply{chatKey: u, text: m.Text, platformID: m.ID})
		}
	}
	return out
}

func (c *whatsappChaos) waitReplies(ctx context.Context, done func([]chaosReply) bool) error {
	return c.wa.WaitFor(ctx, func() bool { return done(c.replies()) })
}

func (c *whatsappChaos) armLate() bool     { return false }
func (c *whatsappChaos) exactlyOnce() bool { return false }
func (c *whatsappChaos) warmUp() bool      { return false }
func (c *whatsappChaos) secrets() []string {
	return []string{wafake.AccessToken, wafake.AppSecret, wafake.VerifyToken, e2eAPIKey}
}

// redelivered counts the user messages whose delivery was posted more
// than once.
func (c *whatsappChaos) redelivered() int {
	n := 0
	for _, d := range c.wa.Deliveries() {
		if d.Kind == "message" && d.Attempts > 1 {
			n++
		}
	}
	return n
}

// check: the clean run answered every delivery 200 before its stop.
func (c *whatsappChaos) check(t *testing.T) {
	for _, d := range c.wa.Deliveries() {
		if !d.Taken {
			t.Errorf("the delivery of %s (%s) was never answered 200: answers %v", d.ID, d.User, d.Answers)
		}
	}
}

// ---- Matrix ----

// matrixChaos is the Matrix rig: a real homeserver (dendrite), the bot's
// account, one user and one DM room per chat, the bot joined to each
// before the first child starts, and an observer (the bot's second device,
// syncing) that reads what the bot sent. Sends carry a transaction id
// derived from the message and the part, so a send repeated after a
// restart is the event the homeserver already has: exactly once.
type matrixChaos struct {
	hs    *dendrite.Server
	bot   dendrite.Account
	users [chaosChats]*mautrix.Client
	rooms [chaosChats]id.RoomID
	seen  *mxUser // the bot's second device: every room's events
	// warm: a child has stored a sync token; before that, a child's first
	// sync takes no messages (history before the bot's first sync), so the
	// warm-up posts only once its child syncs with a token.
	warm atomic.Bool
}

func newMatrixChaos(t *testing.T) *matrixChaos {
	hs := dendrite.Start(t)
	c := &matrixChaos{hs: hs, bot: hs.Register(t, "bot")}
	botCli := hs.Client(t, c.bot)
	ctx := waitCtx(t)
	// The users and their rooms, a few at a time (about 0.7 s each).
	errs := make([]error, len(c.users))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 6)
	for i := range c.users {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			errs[i] = c.addUser(ctx, botCli, i)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	c.seen = observeAs(t, hs, hs.Login(t, c.bot))
	return c
}

// addUser registers user i and has it open a DM room with the bot, which
// joins it.
func (c *matrixChaos) addUser(ctx context.Context, botCli *mautrix.Client, i int) error {
	u, err := c.hs.RegisterUser(ctx, fmt.Sprintf("user%02d", i))
	if err != nil {
		return err
	}
	cli, err := mautrix.NewClient(c.hs.URL, u.UserID, u.AccessToken)
	if err != nil {
		return err
	}
	cli.DeviceID = u.DeviceID
	room, err := cli.CreateRoom(ctx, &mautrix.ReqCreateRoom{Preset: "private_chat", IsDirect: true, Invite: []id.UserID{c.bot.UserID}})
	if err != nil {
		return fmt.Errorf("user%02d's room: %w", i, err)
	}
	if _, err := botCli.JoinRoomByID(ctx, room.RoomID); err != nil {
		return fmt.Errorf("the bot joins user%02d's room: %w", i, err)
	}
	c.users[i], c.rooms[i] = cli, room.RoomID
	return nil
}

// observeAs is an mxUser for an account already registered (a new device
// of it), syncing until the test ends.
func observeAs(t *testing.T, hs *dendrite.Server, a dendrite.Account) *mxUser {
	u := &mxUser{Account: a, rooms: map[id.RoomID][]*event.Event{}}
	u.cli = hs.Client(t, a)
	syncer := mautrix.NewDefaultSyncer()
	u.cli.Syncer, u.cli.Store = syncer, mautrix.NewMemorySyncStore()
	syncer.OnEvent(u.record)
	u.run(t)
	return u
}

func (c *matrixChaos) name() string { return "matrix" }

// events: messages reach the child in a /sync answer (the inbound kill
// point); the batch's token is stored only after its messages, so a dead
// child's batch is handed again to the next one.
func (c *matrixChaos) events() []chaosEvent {
	return []chaosEvent{evTimer, evModelCall, evSendAccepted, evSendAnswered, evInbound}
}

func (c *matrixChaos) upstream() string { return c.hs.URL }

// config: the whole client-server API goes through the tap; plaintext
// rooms, previews off (a preview cut by a kill is an event that answers
// nothing; previews are tested in matrix_test.go).
func (c *matrixChaos) config(tapURL string) func(*config.Channels) {
	return func(ch *config.Channels) {
		s := channels.SectionOf[*matrix.Config](ch.Sections)
		s.Enabled, s.Homeserver, s.UserID = true, tapURL, c.bot.UserID.String()
		s.AccessToken, s.DeviceID = c.bot.AccessToken, c.bot.DeviceID.String()
		s.Encryption, s.StreamPreview = false, false
		s.AllowUsers = nil
		for _, u := range c.users {
			s.AllowUsers = append(s.AllowUsers, u.UserID.String())
		}
	}
}

// classify: a PUT of a message event is a send; /sync is a poll, and one
// with a token (since) means the child has stored one: it is ready.
func (c *matrixChaos) classify(r *http.Request, _ []byte) tapCall {
	switch {
	case r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/send/m.room.message/"):
		return tapCall{send: true}
	case strings.HasSuffix(r.URL.Path, "/sync"):
		since := r.URL.Query().Get("since") != ""
		if since {
			c.warm.Store(true)
		}
		return tapCall{updates: true, ready: since}
	}
	return tapCall{}
}

func (c *matrixChaos) sentID(answer []byte) string {
	var a struct {
		EventID string `json:"event_id"`
	}
	if json.Unmarshal(answer, &a) != nil {
		return ""
	}
	return a.EventID
}

// handedOver: the users' messages in a /sync answer.
func (c *matrixChaos) handedOver(answer []byte) []string {
	var s mautrix.RespSync
	if json.Unmarshal(answer, &s) != nil {
		return nil
	}
	var ids []string
	for _, room := range s.Rooms.Join {
		for _, e := range room.Timeline.Events {
			if e.Type == event.EventMessage && e.Sender != c.bot.UserID {
				ids = append(ids, e.ID.String())
			}
		}
	}
	return ids
}

// post has the users write in their rooms; before any child stored a
// sync token it waits until this one has (see warm).
func (c *matrixChaos) post(ctx context.Context, cyc *chaosCycle, msgs []*chaosMsg) int {
	if !c.warm.Load() {
		select {
		case <-cyc.ready:
		case <-cyc.killed:
			return 0
		case <-ctx.Done():
			return 0
		}
	}
	for i, m := range msgs {
		resp, err := c.users[m.chat].SendMessageEvent(ctx, c.rooms[m.chat], event.EventMessage,
			&event.MessageEventContent{MsgType: event.MsgText, Body: "question " + m.id})
		if err != nil {
			return i // only the test's end stops the homeserver
		}
		m.cycle, m.chatKey, m.platformID = cyc.n, c.rooms[m.chat].String(), resp.EventID.String()
	}
	return len(msgs)
}

// settle: nothing holds on to a dead child; its tap is closed.
func (c *matrixChaos) settle(context.Context) error { return nil }

// replies: the bot's messages in the rooms, as its other device saw them.
func (c *matrixChaos) replies() []chaosReply {
	var out []chaosReply
	for _, room := range c.rooms {
		for _, e := range c.seen.messages(room, c.bot.UserID) {
			out = append(out, chaosReply{chatKey: room.String(), text: e.Content.AsMessage().Body, platformID: e.ID.String()})
		}
	}
	return out
}

func (c *matrixChaos) waitReplies(ctx context.Context, done func([]chaosReply) bool) error {
	return c.seen.changed.Wait(ctx, func() bool { return done(c.replies()) })
}

func (c *matrixChaos) armLate() bool     { return false }
func (c *matrixChaos) exactlyOnce() bool { return true }
func (c *matrixChaos) warmUp() bool      { return true }
func (c *matrixChaos) secrets() []string {
	return []string{c.bot.AccessToken, c.bot.Password, e2eAPIKey}
}

func (c *matrixChaos) check(*testing.T) {}
