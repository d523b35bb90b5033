package e2e

// Replicas: several `switchboard serve` processes (children of this test
// binary, see TestMain) share one PostgreSQL store, and one of them is
// killed with SIGKILL while they work.
//
//   - TestReplicasTakeOverAfterKill: three replicas serve a Telegram webhook
//     behind a round-robin load balancer; 300 messages in 100 chats, one
//     replica killed midway. Every message is answered once, in its chat's
//     order, and the chats the dead replica owned are answered by the others
//     once its leases expire (after the lease TTL, not before).
//   - TestReplicasScheduleFiresOnce: two replicas, scheduled jobs: each due
//     time fires once; the scheduler's holder is killed and the other fires
//     the next due time, once.
//   - TestReplicasReadyz: /readyz and /metrics of a replica (one process).
//
// They need PostgreSQL: SWITCHBOARD_TEST_PG_DSN (see testkit.NeedPostgres).

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"github.com/switchboard-gateway/switchboard/config"
	"github.com/switchboard-gateway/switchboard/internal/testkit/cfgfile"
	"github.com/switchboard-gateway/switchboard/internal/webhooklb"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
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

	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/channels/telegram"
	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/internal/tgfake"
	"github.com/switchboard-gateway/switchboard/store"
)

const (
	// replicaTTL and replicaPoll are cluster.lease_ttl and poll_interval.
	replicaTTL  = 3 * time.Second
	replicaPoll = 100 * time.Millisecond
	// replicaTakeoverMargin is how much later than the lease TTL after a
	// kill the first answer in a dead replica's chat may come: a heartbeat
	// is at most TTL/4 old at the kill (so the lease expires up to TTL after
	// it), then a poll (poll_interval) or a role check (TTL/4) and a turn,
	// on a busy machine. Run alone (-race, 2 cores) the first answers came
	// 0.15 s after the lease expired; with the other packages' tests
	// running beside it, as in CI, up to 3.4 s after (a 5.7 s takeover).
	replicaTakeoverMargin = 4 * time.Second
	// replicaModelDelay is how long the model takes to answer: long enough
	// that a replica holds a few chats with a turn in flight at any time.
	replicaModelDelay = 100 * time.Millisecond

	replicaHookSecret = "replica-hook-Secret_0123456789"
	replicaHookPath   = "/telegram/hook"
)

var (
	replicaQuestionRe = regexp.MustCompile(`\bquestion (c\d{3}m\d)\b`)
	replicaAnswerRe   = regexp.MustCompile(`^answer (c\d{3}m\d)$`)
	replicaJobRe      = regexp.MustCompile(`\[scheduled task ([a-z0-9-]+)\]`)
	replicaHTTPRe     = regexp.MustCompile(`msg="?http listening"? .*?addr=(\S+)`)
	replicaHookRe     = regexp.MustCompile(`msg="?telegram: webhook registered"? .*?listen=(\S+)`)
)

// replicaMsgID is the id of the nth message of chat, in its text and answer.
func replicaMsgID(chat, n int) string { return fmt.Sprintf("c%03dm%d", chat, n) }

// replicaModel answers "question <id>" with "answer <id>" and a scheduled
// task named n with "ran n", after delay; while stalled, answers wait.
type replicaModel struct {
	*testkit.FakeLLM
	stalled atomic.Pointer[chan struct{}] // closed when the stall ends
}

func newReplicaModel(t *testing.T, delay time.Duration) *replicaModel {
	m := &replicaModel{FakeLLM: testkit.NewFakeLLM(t)}
	m.SetDefault(&testkit.Reply{Func: func(r testkit.Recorded) testkit.Reply {
		u := userTexts(r)
		if len(u) == 0 {
			return testkit.Reply{Status: http.StatusInternalServerError, ErrorMessage: "replicas: a request without a user message"}
		}
		var block <-chan struct{}
		if c := m.stalled.Load(); c != nil {
			block = *c
		}
		last := u[len(u)-1]
		// A task's marker is the gateway's system note after its prompt.
		if j := replicaJobRe.FindStringSubmatch(r.Messages[len(r.Messages)-1].Content); r.Messages[len(r.Messages)-1].Role == "system" && j != nil {
			return testkit.Reply{Text: "ran " + j[1], Delay: delay, Block: block}
		}
		if q := replicaQuestionRe.FindStringSubmatch(last); q != nil {
			return testkit.Reply{Text: "answer " + q[1], Delay: delay, Block: block}
		}
		return testkit.Reply{Status: http.StatusInternalServerError, ErrorMessage: fmt.Sprintf("replicas: no answer for %q", last)}
	}})
	return m
}

// stall makes the model's answers wait until the returned function is
// called (once or more).
func (m *replicaModel) stall() (resume func()) {
	c := make(chan struct{})
	m.stalled.Store(&c)
	var once sync.Once
	return func() {
		once.Do(func() {
			m.stalled.Store(nil)
			close(c)
		})
	}
}

// ---- the rig: one schema, the fakes, replica children ----

// replicaRig is a PostgreSQL schema, the fake Bot API and model, and serve
// children on them, each with its own configuration and a tap to the Bot
// API.
type replicaRig struct {
	pg    *testkit.PostgresSchema
	tg    *tgfake.Fake
	model *replicaModel
	dir   string
	crash *crashRig
	sends *replicaSends
	procs []*replicaProc
}

// replicaProc is one replica: its child process and where it listens.
type replicaProc struct {
	id       string
	cfg      string
	tap      *replicaTap
	child    *crashChild
	httpAddr string // http.listen, as bound
	hookAddr string // the webhook's listen address, as bound (webhook mode)
}

func newReplicaRig(t *testing.T, modelDelay time.Duration) *replicaRig {
	t.Helper()
	pg := testkit.NewPostgresSchema(t) // dropped last: registered first
	r := &replicaRig{pg: pg, tg: tgfake.New(t, tgToken), model: newReplicaModel(t, modelDelay), dir: t.TempDir(),
		crash: &crashRig{}, sends: newReplicaSends()}
	t.Cleanup(func() {
		for _, p := range r.procs {
			if p.child != nil {
				p.child.kill()
			}
		}
		for _, p := range r.procs {
			p.tap.Close()
		}
		if t.Failed() {
			for _, p := range r.procs {
				if p.child != nil {
					t.Logf("log of replica %s:\n%s", p.id, p.child.stderr.String())
				}
			}
		}
	})
	return r
}

// config is serve's configuration for replica id; setTelegram sets more of
// channels.telegram, and extra more of the rest (either may be nil).
func (r *replicaRig) config(id, apiEndpoint string, setTelegram func(*telegram.Config), extra func(*config.Config)) *config.Config {
	cfg := modelConfig(r.model.URL)
	cfg.Store.Driver, cfg.Store.DSN = config.StorePostgres, r.pg.DSN
	cfg.Skills.Dir = filepath.Join(r.dir, "skills-"+id)
	cfg.Agent.MaxConcurrentTurns = 16
	cfg.Learning.Enabled = false
	cfg.HTTP.Listen = "127.0.0.1:0"
	cfg.Log.Level = "debug"
	cfg.Cluster.ReplicaID, cfg.Cluster.LeaseTTL, cfg.Cluster.PollInterval = id, replicaTTL, replicaPoll
	tg := config.Section[*telegram.Config](cfg)
	tg.Enabled, tg.Token, tg.APIEndpoint = true, tgToken, apiEndpoint
	if setTelegram != nil {
		setTelegram(tg)
	}
	if extra != nil {
		extra(cfg)
	}
	return cfg
}

// start starts replica id; setTelegram and extra as for config. It returns
// at once: see ready.
func (r *replicaRig) start(t *testing.T, id string, setTelegram func(*telegram.Config), extra func(*config.Config)) *replicaProc {
	t.Helper()
	p := &replicaProc{id: id, tap: newReplicaTap(id, r.tg.URL, r.sends)}
	r.procs = append(r.procs, p)
	p.cfg = filepath.Join(r.dir, id+".yaml")
	if err := cfgfile.WriteFile(p.cfg, r.config(id, p.tap.URL, setTelegram, extra)); err != nil {
		t.Fatal(err)
	}
	r.crash.cfg = p.cfg
	p.child = r.crash.start(t)
	return p
}

// ready waits until the replica serves HTTP (and its webhook, with one)
// and /readyz answers 200.
func (p *replicaProc) ready(t *testing.T, webhook bool) {
	t.Helper()
	ctx := waitCtx(t)
	m, err := waitChildLog(ctx, p.child, replicaHTTPRe)
	if err != nil {
		t.Fatalf("replica %s: %v; log:\n%s", p.id, err, p.child.stderr.String())
	}
	p.httpAddr = m[1]
	if webhook {
		m, err := waitChildLog(ctx, p.child, replicaHookRe)
		if err != nil {
			t.Fatalf("replica %s: %v; log:\n%s", p.id, err, p.child.stderr.String())
		}
		p.hookAddr = m[1]
	}
	if _, err := p.waitReadyz(ctx, func(rd replicaReadiness) bool { return rd.code == http.StatusOK }); err != nil {
		t.Fatalf("replica %s is not ready: %v; log:\n%s", p.id, err, p.child.stderr.String())
	}
}

// alive reports whether the replica's process still runs.
func (p *replicaProc) alive() bool {
	select {
	case <-p.child.done:
		return false
	default:
		return true
	}
}

// waitChildLog waits until the child's log has a line matching re and
// returns the match, or fails if the child exits first.
func waitChildLog(ctx context.Context, c *crashChild, re *regexp.Regexp) ([]string, error) {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if m := re.FindStringSubmatch(c.stderr.String()); m != nil {
			return m, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for %q in the log: %w", re, ctx.Err())
		case <-c.done:
			if m := re.FindStringSubmatch(c.stderr.String()); m != nil {
				return m, nil
			}
			return nil, fmt.Errorf("the process exited (%v) before logging %q", c.cmd.ProcessState, re)
		case <-tick.C:
		}
	}
}

// replicaReadiness is /readyz as the test reads it.
type replicaReadiness struct {
	code   int
	Ready  bool `json:"ready"`
	Checks map[string]struct {
		OK     bool   `json:"ok"`
		Detail string `json:"detail"`
	} `json:"checks"`
	Cluster *struct {
		Replica   string   `json:"replica"`
		Roles     []string `json:"roles"`
		Chats     *int     `json:"chats"`
		Heartbeat string   `json:"heartbeat_age"`
		Healthy   bool     `json:"healthy"`
	} `json:"cluster"`
}

func getReadyz(ctx context.Context, addr string) (replicaReadiness, error) {
	var rd replicaReadiness
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/readyz", nil)
	if err != nil {
		return rd, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return rd, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return rd, err
	}
	if err := json.Unmarshal(body, &rd); err != nil {
		return rd, fmt.Errorf("/readyz answered %d %q: %w", resp.StatusCode, body, err)
	}
	rd.code = resp.StatusCode
	return rd, nil
}

// waitReadyzAt polls /readyz at addr until ok holds for its answer; it
// returns the last answer.
func waitReadyzAt(ctx context.Context, addr string, ok func(replicaReadiness) bool) (replicaReadiness, error) {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var last replicaReadiness
	var lastErr error
	for {
		rd, err := getReadyz(ctx, addr)
		if err == nil && ok(rd) {
			return rd, nil
		}
		if err == nil {
			last, lastErr = rd, nil
		} else {
			lastErr = err
		}
		select {
		case <-ctx.Done():
			return last, fmt.Errorf("/readyz at %s: last answer %+v (%v): %w", addr, last, lastErr, ctx.Err())
		case <-tick.C:
		}
	}
}

// waitReadyz polls the replica's /readyz until ok holds (see waitReadyzAt).
func (p *replicaProc) waitReadyz(ctx context.Context, ok func(replicaReadiness) bool) (replicaReadiness, error) {
	return waitReadyzAt(ctx, p.httpAddr, ok)
}

// ---- the taps: who sent what, when ----

// replicaSend is a message the Bot API accepted, and from which replica.
type replicaSend struct {
	replica string
	at      time.Time // when the Bot API's answer reached the tap
}

type replicaSends struct {
	mu      sync.Mutex
	byID    map[int]replicaSend // the Bot API's message id → the send
	changed chan struct{}       // closed and replaced on every record
}

func newReplicaSends() *replicaSends {
	return &replicaSends{byID: map[int]replicaSend{}, changed: make(chan struct{})}
}

func (s *replicaSends) record(id int, snd replicaSend) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.byID[id] = snd
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *replicaSends) get(id int) (replicaSend, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.byID[id]
	return r, ok
}

// wait waits until the send of message id is recorded: the Bot API keeps
// a message before its answer reaches the tap.
func (s *replicaSends) wait(ctx context.Context, id int) (replicaSend, error) {
	for {
		s.mu.Lock()
		r, ok := s.byID[id]
		ch := s.changed
		s.mu.Unlock()
		if ok {
			return r, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return r, fmt.Errorf("message %d went through no replica's tap: %w", id, ctx.Err())
		}
	}
}

// waitTapped waits until every message the Bot API keeps is recorded.
func (r *replicaRig) waitTapped(t *testing.T) {
	t.Helper()
	ctx := waitCtx(t)
	for _, m := range r.tg.Sent() {
		if _, err := r.sends.wait(ctx, m.MessageID); err != nil {
			t.Fatal(err)
		}
	}
}

// replicaTap forwards one replica's Bot API calls and records its sends.
type replicaTap struct {
	*httptest.Server
	replica, upstream string
	sends             *replicaSends
}

func newReplicaTap(replica, upstream string, sends *replicaSends) *replicaTap {
	p := &replicaTap{replica: replica, upstream: upstream, sends: sends}
	p.Server = httptest.NewServer(p)
	return p
}

func (p *replicaTap) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	send := strings.EqualFold(path.Base(r.URL.Path), "sendMessage")
	resp, answer := forwardTo(r, body, p.upstream, send)
	if send && resp.StatusCode == http.StatusOK {
		var a struct {
			Result struct {
				MessageID int `json:"message_id"`
			} `json:"result"`
		}
		if json.Unmarshal(answer, &a) == nil && a.Result.MessageID != 0 {
			p.sends.record(a.Result.MessageID, replicaSend{replica: p.replica, at: time.Now()})
		}
	}
	answerWith(w, resp, answer)
}

// ---- the load balancer in front of the webhooks ----

// webhookLB is the HTTPS endpoint Telegram posts to, in front of the
// replicas' webhooks (webhooklb.Balancer).
type webhookLB struct {
	*httptest.Server
	*webhooklb.Balancer
}

func newWebhookLB(t *testing.T) *webhookLB {
	lb := &webhookLB{Balancer: webhooklb.New(&http.Client{Timeout: 10 * time.Second})}
	lb.Server = httptest.NewTLSServer(lb.Balancer)
	t.Cleanup(lb.Close)
	return lb
}

// add adds a replica's webhook at addr.
func (lb *webhookLB) add(name, addr string) { lb.Add(name, addr) }

// ---- TestReplicasTakeOverAfterKill ----

const (
	takeoverChats   = 100
	takeoverPerChat = 3
	takeoverKillAt  = 150 // messages accepted before the kill
	// takeoverOrphans: the replica killed holds at least these many chats
	// with pending messages.
	takeoverOrphans = 5
	// takeoverPace spaces the sends (one every pace, across all chats), so
	// that they go on well after the kill.
	takeoverPace = 40 * time.Millisecond
)

// takeoverMsg is one message of the workload.
type takeoverMsg struct {
	chat, n int
	id      string
	user    int64
	// Set by the sender (under takeoverLoad.mu).
	msgID    int // Telegram's message id
	accepted time.Time
	posts    int // POSTs to the load balancer until one was accepted
}

func takeoverUser(chat int) int64 { return 7000 + int64(chat) }

// takeoverLoad is the workload: each chat posts its messages to the
// webhook one after another, each once the previous one was accepted; the
// sends of all chats are paced.
type takeoverLoad struct {
	msgs [][]*takeoverMsg // per chat, in order
	byID map[string]*takeoverMsg

	mu       sync.Mutex
	byMsgID  map[int]*takeoverMsg
	accepted int
	reached  chan struct{} // closed when takeoverKillAt messages were accepted

	done chan struct{} // closed when every sender has returned
	errs chan error
}

func newTakeoverLoad() *takeoverLoad {
	l := &takeoverLoad{byID: map[string]*takeoverMsg{}, byMsgID: map[int]*takeoverMsg{}, reached: make(chan struct{}),
		done: make(chan struct{}), errs: make(chan error, takeoverChats)}
	l.msgs = make([][]*takeoverMsg, takeoverChats)
	for c := range l.msgs {
		for n := 1; n <= takeoverPerChat; n++ {
			m := &takeoverMsg{chat: c, n: n, id: replicaMsgID(c, n), user: takeoverUser(c)}
			l.msgs[c] = append(l.msgs[c], m)
			l.byID[m.id] = m
		}
	}
	return l
}

// send starts the senders; they post to hookURL with client as Telegram
// does (the secret token header; an update not accepted is posted again).
func (l *takeoverLoad) send(ctx context.Context, tg *tgfake.Fake, client *http.Client, hookURL, secret string) {
	var updateID atomic.Int64
	updateID.Store(500000)
	pace := time.NewTicker(takeoverPace)
	post := func(m *takeoverMsg) error {
		msg := tg.NewMessage(m.user, m.user, fmt.Sprintf("user%03d", m.chat), "question "+m.id)
		l.mu.Lock()
		m.msgID = msg["message_id"].(int)
		l.byMsgID[m.msgID] = m
		l.mu.Unlock()
		body, err := json.Marshal(map[string]any{"update_id": updateID.Add(1), "message": msg})
		if err != nil {
			return err
		}
		retry := time.NewTicker(50 * time.Millisecond)
		defer retry.Stop()
		for posts := 1; ; posts++ {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, hookURL, bytes.NewReader(body))
			if err != nil {
				return err
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-Telegram-Bot-Api-Secret-Token", secret)
			resp, err := client.Do(req)
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					l.mu.Lock()
					m.accepted, m.posts = time.Now(), posts
					l.accepted++
					if l.accepted == takeoverKillAt {
						close(l.reached)
					}
					l.mu.Unlock()
					return nil
				}
				if resp.StatusCode < 500 {
					return fmt.Errorf("message %s: the webhook answered %d", m.id, resp.StatusCode)
				}
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("message %s not accepted after %d posts: %w", m.id, posts, ctx.Err())
			case <-retry.C:
			}
		}
	}
	var senders sync.WaitGroup
	for c := range takeoverChats {
		senders.Go(func() {
			for _, m := range l.msgs[c] {
				select {
				case <-pace.C:
				case <-ctx.Done():
					l.errs <- ctx.Err()
					return
				}
				if err := post(m); err != nil {
					l.errs <- err
					return
				}
			}
		})
	}
	go func() {
		senders.Wait()
		pace.Stop()
		close(l.errs)
		close(l.done)
	}()
}

func (l *takeoverLoad) acceptedSoFar() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.accepted
}

// takeoverKill is the kill and what the dead replica left.
type takeoverKill struct {
	victim   *replicaProc
	at       time.Time // just before SIGKILL
	reaped   time.Duration
	expiry   time.Time       // its last heartbeat + the TTL: its leases live until then
	orphans  map[string]int  // chat key → pending messages, of the chats it held
	pending  map[string]bool // the chats it held with pending messages
	accepted int             // messages accepted at the kill
	owned    map[string]int  // per replica: chats held with pending messages, at the kill
}

// killWithWork waits until takeoverKillAt messages were accepted, then
// stalls the model (as a slow one does) until a replica holds at least
// takeoverOrphans chats with pending messages, and kills it with SIGKILL;
// the sends go on meanwhile.
func killWithWork(t *testing.T, rig *replicaRig, load *takeoverLoad) *takeoverKill {
	t.Helper()
	select {
	case <-load.reached:
	case <-load.done:
		t.Fatalf("the senders stopped before %d messages were accepted: %v", takeoverKillAt, <-load.errs)
	}
	resume := rig.model.stall()
	defer resume()
	k := &takeoverKill{owned: map[string]int{}, orphans: map[string]int{}, pending: map[string]bool{}}
	gate := time.NewTicker(10 * time.Millisecond)
	defer gate.Stop()
	for k.victim == nil {
		clear(k.owned)
		for _, row := range pgRows(t, rig.pg.DB, `SELECT l.owner, COUNT(*) FROM chat_leases l WHERE EXISTS (
				SELECT 1 FROM inbox i WHERE i.channel = l.channel AND i.chat_key = l.chat_key AND i.status = 'pending')
			GROUP BY l.owner`) {
			k.owned[row[0]], _ = strconv.Atoi(row[1])
		}
		for _, p := range rig.procs {
			if k.owned[p.id] >= takeoverOrphans && (k.victim == nil || k.owned[p.id] > k.owned[k.victim.id]) {
				k.victim = p
			}
		}
		if k.victim != nil {
			break
		}
		select {
		case <-gate.C:
		case <-load.done:
			t.Fatalf("no replica held %d chats with pending messages while the messages were sent (last: %v)", takeoverOrphans, k.owned)
		}
	}
	k.accepted = load.acceptedSoFar()
	k.at = time.Now()
	k.victim.child.crash(t)
	k.reaped = time.Since(k.at)
	resume()

	// What it left: nobody may take its leases before its heartbeat is TTL
	// old (at least 3/4 TTL from now), so these are as they were at the
	// kill.
	for _, row := range pgRows(t, rig.pg.DB, `SELECT l.chat_key,
			(SELECT COUNT(*) FROM inbox i WHERE i.channel = l.channel AND i.chat_key = l.chat_key AND i.status = 'pending')
		FROM chat_leases l WHERE l.owner = $1`, k.victim.id) {
		n, _ := strconv.Atoi(row[1])
		k.orphans[row[0]] = n
		if n > 0 {
			k.pending[row[0]] = true
		}
	}
	k.expiry = deadReplicaExpiry(t, rig.pg.DB, k.victim.id)
	return k
}

// deadReplicaExpiry is when a dead replica's leases expire: its last
// heartbeat plus the TTL.
func deadReplicaExpiry(t *testing.T, db *sql.DB, replica string) time.Time {
	t.Helper()
	var beat int64
	if err := db.QueryRowContext(t.Context(), `SELECT heartbeat_at FROM replicas WHERE id = $1`, replica).Scan(&beat); err != nil {
		t.Fatalf("the heartbeat of %s: %v", replica, err)
	}
	return time.UnixMilli(beat).Add(replicaTTL)
}

// leaseMove is when an orphaned chat's lease was first seen held by
// another replica (or by none).
type leaseMove struct {
	seen     time.Time
	owner    string // "" when it was seen free
	acquired time.Time
}

// watchLeases polls the leases of chats until none is the dead replica's
// (or time runs out) and returns their moves.
func watchLeases(ctx context.Context, db *sql.DB, dead string, chats map[string]bool) (map[string]leaseMove, error) {
	moves := map[string]leaseMove{}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	ctx, cancel := context.WithTimeout(ctx, replicaTTL+10*time.Second)
	defer cancel()
	for len(moves) < len(chats) {
		rows, err := queryRows(ctx, db, `SELECT chat_key, owner, acquired_at FROM chat_leases WHERE channel = 'telegram'`)
		if err != nil {
			return moves, err
		}
		now := time.Now()
		cur := map[string][]string{}
		for _, r := range rows {
			cur[r[0]] = r
		}
		for chat := range chats {
			l, held := cur[chat]
			if _, done := moves[chat]; done || held && l[1] == dead {
				continue
			}
			mv := leaseMove{seen: now}
			if held {
				ms, _ := strconv.ParseInt(l[2], 10, 64)
				mv.owner, mv.acquired = l[1], time.UnixMilli(ms)
			}
			moves[chat] = mv
		}
		select {
		case <-ctx.Done():
			return moves, nil
		case <-tick.C:
		}
	}
	return moves, nil
}

// TestReplicasTakeOverAfterKill: three replicas serve the Telegram webhook
// behind a load balancer; 300 messages in 100 chats; a replica with work in
// flight is killed midway. Checked: every message answered once (a
// duplicate only where the kill fell between the Bot API's acceptance and
// the delivery record), in the order its chat's messages were accepted;
// the dead replica's chats answered by the others after its leases expired
// and within the TTL and a margin of the kill; the store left consistent.
func TestReplicasTakeOverAfterKill(t *testing.T) {
	start := time.Now()
	rig := newReplicaRig(t, replicaModelDelay)
	lb := newWebhookLB(t)
	users := make([]int64, takeoverChats)
	for i := range users {
		users[i] = takeoverUser(i)
	}
	setTelegram := func(tg *telegram.Config) {
		tg.PollTimeout = 30 * time.Second
		tg.Webhook = telegram.Webhook{URL: lb.URL + replicaHookPath, Listen: "127.0.0.1:0", SecretToken: replicaHookSecret}
		tg.AllowUsers = userIDs(users...)
	}
	for _, id := range []string{"r1", "r2", "r3"} {
		rig.start(t, id, setTelegram, nil)
	}
	for _, p := range rig.procs {
		p.ready(t, true)
		lb.add(p.id, p.hookAddr)
	}
	ctx := t.Context()
	if err := rig.tg.WaitWebhook(waitCtx(t)); err != nil {
		t.Fatal(err)
	}
	hookURL, secret := rig.tg.Webhook()
	if hookURL != lb.URL+replicaHookPath || secret != replicaHookSecret {
		t.Fatalf("webhook registered as %q (secret %q), want %q with the configured secret", hookURL, secret, lb.URL+replicaHookPath)
	}

	started := time.Now()
	load := newTakeoverLoad()
	sctx, stopSending := context.WithTimeout(ctx, 2*e2eWait)
	defer stopSending()
	load.send(sctx, rig.tg, lb.Client(), hookURL, secret)
	k := killWithWork(t, rig, load)
	t.Logf("killed %s after %d messages were accepted (%s after the first send); chats with pending messages per replica then: %v; it held %d chats, %d with pending messages; its leases expire %s after the kill",
		k.victim.id, k.accepted, k.at.Sub(started).Round(time.Millisecond), k.owned, len(k.orphans), len(k.pending), k.expiry.Sub(k.at).Round(time.Millisecond))
	if len(k.pending) == 0 {
		t.Errorf("the killed replica held no chat with pending messages: the takeover is not exercised")
	}
	type watched struct {
		moves map[string]leaseMove
		err   error
	}
	watch := make(chan watched, 1)
	go func() {
		moves, err := watchLeases(ctx, rig.pg.DB, k.victim.id, k.pending)
		watch <- watched{moves, err}
	}()

	<-load.done
	for err := range load.errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}
	sendWall := time.Since(started)
	waitAllAnswered(t, rig.tg, load.byID)
	answeredWall := time.Since(started)
	// …and finished in the store: no message pending, no turn running, and
	// every live replica has given its chats back.
	wctx, cancel := context.WithTimeout(ctx, e2eWait)
	defer cancel()
	if err := pgWait(wctx, rig.pg.DB, `SELECT
			(SELECT COUNT(*) FROM inbox WHERE status = 'pending') +
			(SELECT COUNT(*) FROM turns WHERE status = 'running') +
			(SELECT COUNT(*) FROM chat_leases WHERE owner <> $1)`, k.victim.id); err != nil {
		t.Errorf("the store did not settle: %v: pending %v, running turns %v, leases %v", err,
			pgRows(t, rig.pg.DB, `SELECT id, chat_key FROM inbox WHERE status = 'pending'`),
			pgRows(t, rig.pg.DB, `SELECT id, inbox_id FROM turns WHERE status = 'running'`),
			pgRows(t, rig.pg.DB, `SELECT chat_key, owner FROM chat_leases WHERE owner <> $1`, k.victim.id))
	}
	w := <-watch
	if w.err != nil {
		t.Errorf("watching the leases: %v", w.err)
	}

	// The survivors stop cleanly and hand everything back.
	for _, p := range rig.procs {
		if p == k.victim {
			continue
		}
		if !p.alive() {
			t.Fatalf("replica %s died (%v); log:\n%s", p.id, p.child.cmd.ProcessState, p.child.stderr.String())
		}
		p.child.stop(t)
	}
	for _, p := range rig.procs {
		checkReplicaLog(t, p)
	}
	if got := pgRows(t, rig.pg.DB, `SELECT id FROM replicas ORDER BY id`); len(got) != 1 || got[0][0] != k.victim.id {
		t.Errorf("replicas rows after the clean stops = %v, want only the dead %s", got, k.victim.id)
	}
	if got := pgRows(t, rig.pg.DB, `SELECT channel, chat_key, owner FROM chat_leases WHERE owner <> $1`, k.victim.id); len(got) > 0 {
		t.Errorf("leases left by replicas that stopped cleanly: %v", got)
	}

	rig.waitTapped(t)
	copies, dupAt := checkTakeoverAnswers(t, rig, load, k)
	checkTakeoverStore(t, rig.pg.DB, load, copies)
	took, moved := checkTakeoverTimes(t, rig, k, w.moves)

	// The report.
	bySender := map[string]int{}
	for _, s := range rig.tg.Sent() {
		snd, _ := rig.sends.get(s.MessageID)
		bySender[snd.replica]++
	}
	var latency []time.Duration // from a message's acceptance to its first answer
	posts, reposted := 0, 0
	for id, m := range load.byID {
		if cs := copies[id]; len(cs) > 0 {
			snd, _ := rig.sends.get(cs[0].MessageID)
			latency = append(latency, snd.at.Sub(m.accepted))
		}
		posts += m.posts
		if m.posts > 1 {
			reposted++
		}
	}
	perReplica := fmt.Sprint(lb.Accepted())
	t.Logf("%d messages in %d chats: sent in %s, all answered %s after the first send (kill at %s, process reaped %s later); "+
		"%d replies, by replica %v; updates accepted by replica %v, %d load-balancer retries, %d messages posted again (%d posts); "+
		"%d duplicate replies (explained; the Bot API took the dead replica's copies %s from the kill); "+
		"in the %d chats with pending messages: first answer %s after the kill, lease seen moved %s (expiry %s); "+
		"answers came %s after their message was accepted; test wall %s",
		len(load.byID), takeoverChats, sendWall.Round(time.Millisecond), answeredWall.Round(time.Millisecond), k.at.Sub(started).Round(time.Millisecond),
		k.reaped.Round(time.Millisecond), len(rig.tg.Sent()), bySender, perReplica, lb.Retries(), reposted, posts,
		len(dupAt), spread(dupAt), len(k.pending), spread(took), spread(moved), k.expiry.Sub(k.at).Round(time.Millisecond),
		spread(latency), time.Since(start).Round(time.Millisecond))
}

// waitAllAnswered waits until every message has an answer.
func waitAllAnswered(t *testing.T, tg *tgfake.Fake, byID map[string]*takeoverMsg) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), e2eWait)
	defer cancel()
	answered := func() map[string]bool {
		out := map[string]bool{}
		for _, s := range tg.Sent() {
			if m := replicaAnswerRe.FindStringSubmatch(s.Text); m != nil {
				out[m[1]] = true
			}
		}
		return out
	}
	for {
		n := len(tg.Sent())
		if len(answered()) == len(byID) {
			return
		}
		if _, err := tg.WaitSent(ctx, n+1); err != nil {
			got := answered()
			var missing []string
			for id := range byID {
				if !got[id] {
					missing = append(missing, id)
				}
			}
			slices.Sort(missing)
			t.Fatalf("%d of %d messages answered; missing %v: %v", len(got), len(byID), missing, err)
		}
	}
}

// checkTakeoverAnswers checks the answers: each message answered once (or
// a duplicate the kill explains), in its chat, in its chat's order; the
// last copy recorded as its delivery. It returns each message's copies
// and, for each explained duplicate, when the Bot API took it (from the
// kill).
func checkTakeoverAnswers(t *testing.T, rig *replicaRig, load *takeoverLoad, k *takeoverKill) (map[string][]tgfake.SentMessage, []time.Duration) {
	t.Helper()
	recorded := map[int]bool{} // platform message ids with a delivery record
	for _, row := range pgRows(t, rig.pg.DB, `SELECT platform_msg_id FROM deliveries`) {
		id, err := strconv.Atoi(row[0])
		if err != nil {
			t.Errorf("a delivery without a platform message id: %v", row)
			continue
		}
		recorded[id] = true
	}
	copies := map[string][]tgfake.SentMessage{}
	perChat := map[int64][]string{} // ids answered in the chat, in order, consecutive repeats folded
	for _, s := range rig.tg.Sent() {
		m := replicaAnswerRe.FindStringSubmatch(s.Text)
		if m == nil || load.byID[m[1]] == nil {
			t.Errorf("the bot sent %q to chat %d, which answers no message", s.Text, s.ChatID)
			continue
		}
		msg := load.byID[m[1]]
		if s.ChatID != msg.user {
			t.Errorf("message %s of chat %d was answered in chat %d", msg.id, msg.user, s.ChatID)
		}
		copies[msg.id] = append(copies[msg.id], s)
		if ids := perChat[s.ChatID]; len(ids) == 0 || ids[len(ids)-1] != msg.id {
			perChat[s.ChatID] = append(ids, msg.id)
		}
	}
	var dupAt []time.Duration
	for id, cs := range copies {
		last := cs[len(cs)-1]
		if !recorded[last.MessageID] {
			snd, _ := rig.sends.get(last.MessageID)
			t.Errorf("message %s: its answer (platform id %d, sent by %s) has no delivery record", id, last.MessageID, snd.replica)
		}
		// A copy but the last is explained only by the window the Bot API
		// leaves open (it has no idempotency key): the dead replica sent it
		// and was killed before its delivery record committed; a live one
		// then resumed the turn and sent it again.
		for i, c := range cs[:len(cs)-1] {
			snd, _ := rig.sends.get(c.MessageID)
			next, _ := rig.sends.get(cs[i+1].MessageID)
			switch {
			case snd.replica != k.victim.id:
				t.Errorf("message %s answered %d times: copy %d sent by %s, which was not killed (then by %s)", id, len(cs), i+1, snd.replica, next.replica)
			case recorded[c.MessageID]:
				t.Errorf("message %s: copy %d (by %s) has a delivery record, yet %s sent it again", id, i+1, snd.replica, next.replica)
			case next.replica == k.victim.id:
				t.Errorf("message %s: the killed %s sent it twice", id, k.victim.id)
			default:
				dupAt = append(dupAt, snd.at.Sub(k.at))
			}
		}
	}
	for c := range takeoverChats {
		var want []string
		for _, m := range load.msgs[c] {
			want = append(want, m.id)
		}
		if got := perChat[takeoverUser(c)]; !slices.Equal(got, want) {
			t.Errorf("chat %d: answers in the order %v, want %v (the order the messages were accepted)", takeoverUser(c), got, want)
		}
	}
	return copies, dupAt
}

// checkTakeoverStore checks the store: every message stored once and done,
// with one completed turn and one delivery, its (last) answer.
func checkTakeoverStore(t *testing.T, db *sql.DB, load *takeoverLoad, copies map[string][]tgfake.SentMessage) {
	t.Helper()
	rows := pgRows(t, db, `SELECT i.message_id, i.chat_key, i.status,
			COALESCE((SELECT string_agg(d.platform_msg_id, ',' ORDER BY d.id) FROM deliveries d WHERE d.inbox_id = i.id), ''),
			(SELECT COUNT(*) FROM turns t WHERE t.inbox_id = i.id),
			(SELECT COUNT(*) FROM turns t WHERE t.inbox_id = i.id AND t.status = 'completed')
		FROM inbox i WHERE i.channel = 'telegram'`)
	if len(rows) != len(load.byID) {
		t.Errorf("the inbox holds %d Telegram messages, want %d", len(rows), len(load.byID))
	}
	seen := map[string]bool{}
	for _, r := range rows {
		msgID, _ := strconv.Atoi(r[0])
		m := load.byMsgID[msgID]
		if m == nil || seen[m.id] {
			t.Errorf("inbox row %v: not a message the test sent, or stored twice", r)
			continue
		}
		seen[m.id] = true
		chat, status, deliveries, turns, completed := r[1], r[2], r[3], r[4], r[5]
		if chat != strconv.FormatInt(m.user, 10) || status != "done" || turns != "1" || completed != "1" || deliveries == "" || strings.Contains(deliveries, ",") {
			t.Errorf("message %s: inbox row chat %s, status %s, %s turn(s) (%s completed), deliveries [%s]; want chat %d, done, one completed turn, one delivery",
				m.id, chat, status, turns, completed, deliveries, m.user)
			continue
		}
		if cs := copies[m.id]; len(cs) == 0 || strconv.Itoa(cs[len(cs)-1].MessageID) != deliveries {
			t.Errorf("message %s: its delivery record names platform message %s, not its answer", m.id, deliveries)
		}
	}
	if got := pgRows(t, db, `SELECT COUNT(*) FROM deliveries d JOIN inbox i ON i.id = d.inbox_id WHERE i.status <> 'done'`); got[0][0] != "0" {
		t.Errorf("%s deliveries of messages not done", got[0][0])
	}
	if got := pgRows(t, db, `SELECT status, COUNT(*) FROM turns GROUP BY status`); len(got) != 1 || got[0][0] != "completed" {
		t.Errorf("turns by status: %v, want all completed", got)
	}
}

// checkTakeoverTimes checks that the dead replica's chats with pending
// messages were answered by the others after its leases expired (its last
// heartbeat plus the TTL) and not much later than the TTL after the kill;
// it returns the delays of the first answers and of the lease moves, from
// the kill.
func checkTakeoverTimes(t *testing.T, rig *replicaRig, k *takeoverKill, moves map[string]leaseMove) (took, moved []time.Duration) {
	t.Helper()
	limit := replicaTTL + replicaTakeoverMargin
	sent := rig.tg.Sent()
	for chat := range k.pending {
		user, _ := strconv.ParseInt(chat, 10, 64)
		var first replicaSend
		for _, s := range sentTo(sent, user) {
			if snd, _ := rig.sends.get(s.MessageID); snd.replica != k.victim.id && snd.at.After(k.at) {
				first = snd
				break
			}
		}
		if first.replica == "" {
			t.Errorf("chat %s (pending messages at the kill) was never answered by another replica", chat)
			continue
		}
		d := first.at.Sub(k.at)
		took = append(took, d)
		if first.at.Before(k.expiry.Add(-5 * time.Millisecond)) {
			t.Errorf("chat %s: %s answered %s after the kill, before the dead replica's lease expired (%s after the kill)",
				chat, first.replica, d.Round(time.Millisecond), k.expiry.Sub(k.at).Round(time.Millisecond))
		}
		if d > limit {
			t.Errorf("chat %s: first answer by another replica (%s) %s after the kill, want within %s", chat, first.replica, d.Round(time.Millisecond), limit)
		}
	}
	for chat := range k.pending {
		mv, ok := moves[chat]
		if !ok {
			t.Errorf("chat %s: its lease never left the dead replica", chat)
			continue
		}
		moved = append(moved, mv.seen.Sub(k.at))
		if mv.owner != "" && mv.acquired.Before(k.expiry.Add(-time.Millisecond)) {
			t.Errorf("chat %s: %s took the lease %s after the kill, before it expired (%s after the kill)", chat, mv.owner,
				mv.acquired.Sub(k.at).Round(time.Millisecond), k.expiry.Sub(k.at).Round(time.Millisecond))
		}
	}
	return took, moved
}

// spread is min/median/max of ds.
func spread(ds []time.Duration) string {
	if len(ds) == 0 {
		return "(none)"
	}
	ds = slices.Clone(ds)
	slices.Sort(ds)
	return fmt.Sprintf("min %s, median %s, max %s", ds[0].Round(time.Millisecond), ds[len(ds)/2].Round(time.Millisecond), ds[len(ds)-1].Round(time.Millisecond))
}

// checkReplicaLog checks a replica's log for what nothing excuses.
func checkReplicaLog(t *testing.T, p *replicaProc) {
	t.Helper()
	logs := p.child.stderr.String()
	for _, bad := range []string{"WARNING: DATA RACE", "panic:", "could not write a heartbeat", replicaHookSecret} {
		if strings.Contains(logs, bad) {
			t.Errorf("the log of replica %s holds %q:\n%s", p.id, bad, logs)
		}
	}
	checkNoSecrets(t, "the log of replica "+p.id, logs)
}

// pgRows returns a query's rows as text.
func pgRows(t *testing.T, db *sql.DB, query string, args ...any) [][]string {
	t.Helper()
	rows, err := queryRows(t.Context(), db, query, args...)
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// pgWait polls query, which returns one number, until it is 0.
func pgWait(ctx context.Context, db *sql.DB, query string, args ...any) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		var n int
		if err := db.QueryRowContext(ctx, query, args...).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("still %d: %w", n, ctx.Err())
		case <-tick.C:
		}
	}
}

// ---- TestReplicasScheduleFiresOnce ----

const scheduleChat int64 = 7101

// TestReplicasScheduleFiresOnce: two replicas, long polling. A job due
// while both run fires once (one run, one message, on the scheduler's
// holder); the holder is killed before the next due time, and the other
// takes the role once its lease expires and fires that time once; it takes
// the Telegram poller's role too, if it did not have it, and answers.
func TestReplicasScheduleFiresOnce(t *testing.T) {
	start := time.Now()
	rig := newReplicaRig(t, 0)
	// Long polling: the telegram-poller role moves with a kill too. A
	// configured job far ahead checks that a scheduler taking over does not
	// add or revive config jobs.
	setTelegram := func(tg *telegram.Config) {
		tg.PollTimeout = 2 * time.Second
		tg.AllowUsers = userIDs(scheduleChat)
	}
	extra := func(cfg *config.Config) {
		cfg.Schedule.Jobs = []config.ScheduleJob{{Name: "far-ahead", Spec: "at 2099-01-01 09:00", Channel: "telegram",
			Chat: strconv.FormatInt(scheduleChat, 10), Kind: "reminder", Text: "not in this test"}}
	}
	for _, id := range []string{"s1", "s2"} {
		rig.start(t, id, setTelegram, extra)
	}
	for _, p := range rig.procs {
		p.ready(t, false)
	}
	ctx := t.Context()

	// Each role is held by exactly one replica, and /readyz says which.
	holders := waitRoleHolders(t, rig.procs, "scheduler", "telegram-poller")
	for _, p := range rig.procs {
		checkReplicaMetrics(t, p.httpAddr, p.id)
	}
	st, err := store.OpenPostgres(ctx, rig.pg.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()

	// A job due while both run fires once, on the scheduler's holder.
	jobA := createDueJob(t, st, "job-a", time.Second)
	sentA := waitReplicaText(t, rig, scheduleChat, "ran job-a", 1)
	sndA, _ := rig.sends.get(sentA.MessageID)
	if sndA.replica != holders["scheduler"] {
		t.Errorf("job-a was sent by %q, want the scheduler's holder %s", sndA.replica, holders["scheduler"])
	} else if sndA.at.Before(*jobA.NextRunAt) {
		t.Errorf("job-a ran %s before it was due", jobA.NextRunAt.Sub(sndA.at))
	}
	waitRunsDone(t, rig.pg.DB, jobA.ID)

	// Kill the scheduler's holder just before the next due time: the other
	// takes the role once the lease expires and fires it, once.
	victim, survivor := rig.procs[0], rig.procs[1]
	if victim.id != holders["scheduler"] {
		victim, survivor = survivor, victim
	}
	jobB := createDueJob(t, st, "job-b", 500*time.Millisecond)
	killedAt := time.Now()
	victim.child.crash(t)
	if !killedAt.Before(*jobB.NextRunAt) {
		t.Fatalf("the kill came %s after job-b was due: the dead replica may have fired it", killedAt.Sub(*jobB.NextRunAt))
	}
	expiry := deadReplicaExpiry(t, rig.pg.DB, victim.id)
	sentB := waitReplicaText(t, rig, scheduleChat, "ran job-b", 1)
	snd, _ := rig.sends.get(sentB.MessageID)
	took := snd.at.Sub(killedAt)
	switch {
	case snd.replica != survivor.id:
		t.Errorf("job-b was sent by %q, want the survivor %s", snd.replica, survivor.id)
	case snd.at.Before(expiry.Add(-5 * time.Millisecond)):
		t.Errorf("job-b ran %s after the kill, before the dead scheduler's role expired (%s after the kill)",
			took.Round(time.Millisecond), expiry.Sub(killedAt).Round(time.Millisecond))
	case took > replicaTTL+replicaTakeoverMargin:
		t.Errorf("job-b ran %s after the kill, want within %s", took.Round(time.Millisecond), replicaTTL+replicaTakeoverMargin)
	}
	waitRunsDone(t, rig.pg.DB, jobB.ID)
	rd, err := survivor.waitReadyz(waitCtx(t), func(rd replicaReadiness) bool {
		return rd.Cluster != nil && slices.Contains(rd.Cluster.Roles, "scheduler") && slices.Contains(rd.Cluster.Roles, "telegram-poller")
	})
	if err != nil || rd.Cluster == nil || rd.Cluster.Chats == nil {
		t.Fatalf("the survivor did not take both roles: %v", err)
	}

	// The survivor polls Telegram now: a message is answered once.
	rig.tg.PushText(scheduleChat, scheduleChat, "sched", "question "+replicaMsgID(101, 1))
	waitReplicaText(t, rig, scheduleChat, "answer "+replicaMsgID(101, 1), 1)

	if !survivor.alive() {
		t.Fatalf("replica %s died (%v); log:\n%s", survivor.id, survivor.child.cmd.ProcessState, survivor.child.stderr.String())
	}
	survivor.child.stop(t)
	for _, p := range rig.procs {
		checkReplicaLog(t, p)
	}

	// Once in all, also after the clean stop: one run per due time, its
	// delivery recorded, one message.
	for _, job := range []store.Schedule{jobA, jobB} {
		runs := pgRows(t, rig.pg.DB, `SELECT r.id, r.outcome, r.scheduled_for,
				(SELECT COUNT(*) FROM schedule_deliveries d WHERE d.run_id = r.id)
			FROM schedule_runs r WHERE r.schedule_id = $1 ORDER BY r.id`, job.ID)
		if len(runs) != 1 || runs[0][1] != store.RunOK || runs[0][2] != strconv.FormatInt(job.NextRunAt.UnixMilli(), 10) || runs[0][3] != "1" {
			t.Errorf("%s: runs (id, outcome, scheduled for, deliveries) = %v, want one ok run for %d with one delivery", job.Name, runs, job.NextRunAt.UnixMilli())
		}
		if got := pgRows(t, rig.pg.DB, `SELECT state FROM schedules WHERE id = $1`, job.ID); got[0][0] != store.ScheduleDone {
			t.Errorf("%s: state %s, want done", job.Name, got[0][0])
		}
	}
	counts := map[string]int{}
	for _, s := range sentTo(rig.tg.Sent(), scheduleChat) {
		counts[s.Text]++
	}
	want := map[string]int{"ran job-a": 1, "ran job-b": 1, "answer " + replicaMsgID(101, 1): 1}
	if len(counts) != len(want) || counts["ran job-a"] != 1 || counts["ran job-b"] != 1 || counts["answer "+replicaMsgID(101, 1)] != 1 {
		t.Errorf("the chat holds %v, want each once: %v", counts, want)
	}
	if got := pgRows(t, rig.pg.DB, `SELECT state, COUNT(*) FROM schedules WHERE name = 'far-ahead' GROUP BY state`); len(got) != 1 || got[0][0] != store.ScheduleActive || got[0][1] != "1" {
		t.Errorf("the configured job far-ahead: (state, rows) = %v, want one active row", got)
	}
	if got := pgRows(t, rig.pg.DB, `SELECT name, owner FROM roles`); len(got) > 0 {
		t.Errorf("roles left after the survivor stopped cleanly: %v", got)
	}
	t.Logf("roles at the start %v; job-a ran %s after it was due; killed %s, job-b (due %s after the kill; the dead one's role expired %s after it) ran on %s %s after the kill; survivor's /readyz cluster: roles %v, chats %d, healthy %v; test wall %s",
		holders, sndA.at.Sub(*jobA.NextRunAt).Round(time.Millisecond), victim.id, jobB.NextRunAt.Sub(killedAt).Round(time.Millisecond),
		expiry.Sub(killedAt).Round(time.Millisecond), snd.replica, took.Round(time.Millisecond), rd.Cluster.Roles, *rd.Cluster.Chats,
		rd.Cluster.Healthy, time.Since(start).Round(time.Millisecond))
}

// createDueJob stores a one-shot task in scheduleChat due at the first
// whole second (the spec's resolution) at least lead from now.
func createDueJob(t *testing.T, st *store.Store, name string, lead time.Duration) store.Schedule {
	t.Helper()
	earliest := time.Now().UTC().Add(lead)
	at := earliest.Truncate(time.Second)
	if at.Before(earliest) {
		at = at.Add(time.Second)
	}
	chat := strconv.FormatInt(scheduleChat, 10)
	sc, err := st.CreateSchedule(t.Context(), store.Schedule{Name: name, Origin: store.OriginChat,
		Spec: "at " + at.Format("2006-01-02 15:04:05"), Timezone: "UTC", Kind: "task", Body: "Say that the job ran.",
		Channel: "telegram", ChatKey: chat, ChatType: "private", OwnerID: chat, NextRunAt: &at})
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// waitReplicaText waits until chat holds n messages with text and returns
// the first, once its tap has recorded it.
func waitReplicaText(t *testing.T, rig *replicaRig, chat int64, text string, n int) tgfake.SentMessage {
	t.Helper()
	ctx := waitCtx(t)
	for {
		all := rig.tg.Sent()
		var got []tgfake.SentMessage
		for _, s := range sentTo(all, chat) {
			if s.Text == text {
				got = append(got, s)
			}
		}
		if len(got) >= n {
			if _, err := rig.sends.wait(ctx, got[0].MessageID); err != nil {
				t.Fatal(err)
			}
			return got[0]
		}
		if _, err := rig.tg.WaitSent(ctx, len(all)+1); err != nil {
			t.Fatalf("want %d × %q in chat %d, have %q: %v", n, text, chat, sentTexts(sentTo(rig.tg.Sent(), chat)), err)
		}
	}
}

// waitRunsDone waits until no run of the job is running.
func waitRunsDone(t *testing.T, db *sql.DB, job int64) {
	t.Helper()
	if err := pgWait(waitCtx(t), db, `SELECT COUNT(*) FROM schedule_runs WHERE schedule_id = $1 AND outcome = 'running'`, job); err != nil {
		t.Fatalf("job %d's run did not finish: %v", job, err)
	}
}

// waitRoleHolders waits until each role is held by exactly one of procs,
// as their /readyz shows, and returns role → replica.
func waitRoleHolders(t *testing.T, procs []*replicaProc, roles ...string) map[string]string {
	t.Helper()
	ctx := waitCtx(t)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var last []string
	for {
		holders := map[string][]string{}
		var answers []string
		ok := true
		for _, p := range procs {
			rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			rd, err := getReadyz(rctx, p.httpAddr)
			cancel()
			if err != nil || rd.Cluster == nil {
				ok = false
				answers = append(answers, fmt.Sprintf("%s: %d %v", p.id, rd.code, err))
				continue
			}
			c := rd.Cluster
			answers = append(answers, fmt.Sprintf("%s: %d, ready %v, cluster check %+v, %+v", p.id, rd.code, rd.Ready, rd.Checks["cluster"], *c))
			if rd.code != http.StatusOK || !rd.Ready || !rd.Checks["cluster"].OK || c.Replica != p.id || !c.Healthy || c.Chats == nil || c.Roles == nil {
				ok = false
			}
			for _, r := range c.Roles {
				holders[r] = append(holders[r], p.id)
			}
		}
		out := map[string]string{}
		for _, r := range roles {
			if len(holders[r]) != 1 {
				ok = false
				break
			}
			out[r] = holders[r][0]
		}
		if ok {
			return out
		}
		if ctx.Err() == nil {
			last = answers
		}
		select {
		case <-ctx.Done():
			t.Fatalf("each of the roles %v is not held by exactly one replica with a healthy /readyz; the last answers: %v", roles, last)
		case <-tick.C:
		}
	}
}

// checkReplicaMetrics checks that the metrics carry the replica's label.
func checkReplicaMetrics(t *testing.T, addr, replica string) {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %d, %v", resp.StatusCode, err)
	}
	label := fmt.Sprintf(`replica=%q`, replica)
	found := false
	var unlabelled []string
	for line := range strings.Lines(string(body)) {
		if strings.HasPrefix(line, "#") || strings.TrimSpace(line) == "" {
			continue
		}
		if !strings.Contains(line, label) {
			unlabelled = append(unlabelled, strings.TrimSpace(line))
		}
		found = found || strings.HasPrefix(line, "switchboard_build_info{")
	}
	if len(unlabelled) > 0 {
		t.Errorf("%d series of replica %s lack the label %s:\n%s", len(unlabelled), replica, label, strings.Join(unlabelled, "\n"))
	}
	if !found {
		t.Errorf("replica %s: no switchboard_build_info in /metrics", replica)
	}
}

// ---- TestReplicasReadyz ----

// TestReplicasReadyz: a replica (here alone on its store) shows in /readyz
// its id, its roles and the chats whose lease it holds — one while a turn
// runs, none once the chat is idle — and labels its metrics; a clean stop
// hands everything back.
func TestReplicasReadyz(t *testing.T) {
	pg := testkit.NewPostgresSchema(t)
	tg := tgfake.New(t, tgToken)
	model := testkit.NewFakeLLM(t)
	release := make(chan struct{})
	model.SetDefault(&testkit.Reply{Func: func(r testkit.Recorded) testkit.Reply {
		return testkit.Reply{Text: "released", Block: release}
	}})
	const chat int64 = 7201
	addr := freeAddr(t)
	c := modelConfig(model.URL)
	c.Store.Driver, c.Store.DSN = config.StorePostgres, pg.DSN
	c.Skills.Dir = filepath.Join(t.TempDir(), "skills")
	c.Learning.Enabled = false
	c.HTTP.Listen = addr
	c.Cluster.ReplicaID, c.Cluster.LeaseTTL, c.Cluster.PollInterval = "solo", replicaTTL, replicaPoll
	*config.Section[*telegram.Config](c) = telegram.Config{Common: channels.Common{Enabled: true, AllowUsers: userIDs(chat)}, Token: tgToken, APIEndpoint: tg.URL, PollTimeout: 2 * time.Second}
	cfg := cfgfile.Write(t, c)
	s := startServe(t, cfg, func(ctx context.Context) error {
		_, err := waitReadyzAt(ctx, addr, func(rd replicaReadiness) bool { return rd.code == http.StatusOK })
		return err
	})
	ctx := waitCtx(t)

	// Idle: both roles (nobody else is there), no chat.
	rd, err := waitReadyzAt(ctx, addr, func(rd replicaReadiness) bool {
		return rd.Cluster != nil && slices.Equal(rd.Cluster.Roles, []string{"scheduler", "telegram-poller"})
	})
	if err != nil {
		t.Fatalf("the replica did not take both roles: %v\n%s", err, s.stderr.String())
	}
	if c := rd.Cluster; !rd.Ready || !rd.Checks["cluster"].OK || c.Replica != "solo" || !c.Healthy || c.Chats == nil || *c.Chats != 0 || c.Heartbeat == "" {
		t.Errorf("/readyz when idle: ready %v, cluster check %+v, cluster %+v; want ready, replica solo, healthy, 0 chats", rd.Ready, rd.Checks["cluster"], *c)
	}
	checkReplicaMetrics(t, addr, "solo")

	// A turn runs: the replica holds its chat's lease.
	tg.PushText(chat, chat, "solo", "hold this chat")
	if err := model.WaitCalls(ctx, 1); err != nil {
		t.Fatal(err)
	}
	chats := func(n int) func(replicaReadiness) bool {
		return func(rd replicaReadiness) bool {
			return rd.Cluster != nil && rd.Cluster.Chats != nil && *rd.Cluster.Chats == n
		}
	}
	if _, err := waitReadyzAt(ctx, addr, chats(1)); err != nil {
		t.Errorf("/readyz while a turn runs: %v", err)
	}
	if got := pgRows(t, pg.DB, `SELECT channel, chat_key, owner FROM chat_leases`); len(got) != 1 || got[0][1] != strconv.FormatInt(chat, 10) || got[0][2] != "solo" {
		t.Errorf("leases while a turn runs = %v, want the chat's, held by solo", got)
	}
	close(release)
	if sent := waitSentToT(t, tg, chat, 1); sent[0].Text != "released" {
		t.Errorf("reply %q, want the model's", sent[0].Text)
	}
	// Idle again: the chat's lease is given back.
	if _, err := waitReadyzAt(ctx, addr, chats(0)); err != nil {
		t.Errorf("/readyz after the turn: %v", err)
	}

	if code := s.stop(t); code != exitOK {
		t.Fatalf("serve exited with %d; log:\n%s", code, s.stderr.String())
	}
	for _, table := range []string{"replicas", "roles", "chat_leases"} {
		if got := pgRows(t, pg.DB, `SELECT COUNT(*) FROM `+table); got[0][0] != "0" {
			t.Errorf("%s rows left after a clean stop: %s", table, got[0][0])
		}
	}
}

// waitSentToT is waitSentTo bounded by e2eWait, failing the test.
func waitSentToT(t *testing.T, tg *tgfake.Fake, chat int64, n int) []tgfake.SentMessage {
	t.Helper()
	sent, err := waitSentTo(waitCtx(t), tg, chat, n)
	if err != nil {
		t.Fatalf("want %d message(s) in chat %d, have %q: %v", n, chat, sentTexts(sent), err)
	}
	return sent
}

// freeAddr is a loopback address with a port free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
