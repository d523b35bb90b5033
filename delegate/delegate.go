// Package delegate is the delegate tool: a turn starts a background task
// that works on its own (its own session, a restricted tool set, its own
// step cap) while the chat goes on, and posts its result to the chat once
// done. Tasks is the tool's source for a chat's turns, and what /tasks and
// /stop see of the chat's tasks (router.Tasks).
package delegate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/llm"
	"github.com/switchboard-gateway/switchboard/router"
	"github.com/switchboard-gateway/switchboard/store"
)

// Delegation limits.
const (
	// Tool is the tool that starts a background task.
	Tool = "delegate"
	// maxTasksPerChat and maxTasks bound background work so one chat (or a
	// runaway model) cannot flood the model or the machine.
	maxTasksPerChat = 2
	maxTasks        = 8
	// taskMaxSteps caps a background task's own loop.
	taskMaxSteps = 15
)

// Runner runs agent turns (agent.Agent implements it).
type Runner interface {
	Run(ctx context.Context, t agent.Turn) agent.Result
}

// Store is the part of the store tasks need (*store.Store).
type Store interface {
	EnsureChat(ctx context.Context, channel, key, chatType, title string) (store.Chat, error)
	NewSession(ctx context.Context, chatID int64) (store.Session, error)
}

var _ Store = (*store.Store)(nil)

// Config wires Tasks.
type Config struct {
	Agent       Runner
	Store       Store
	TurnTimeout time.Duration // a task's bound; default router.DefaultTurnTimeout
	Location    *time.Location
	// OnEvent observes every task turn's events; may be nil.
	OnEvent func(in channels.Inbound, ev agent.Event)
	Logger  *slog.Logger
}

// Tasks tracks the running background tasks. It implements router.Tasks:
// the router starts it (tasks run until the router shuts down), lists and
// cancels a chat's tasks, and waits for them at shutdown.
type Tasks struct {
	cfg Config
	log *slog.Logger

	mu    sync.Mutex
	base  context.Context // from Start: ends at shutdown
	chats router.Chats    // from Start
	next  int
	run   map[int]*task
	wg    sync.WaitGroup
}

var _ router.Tasks = (*Tasks)(nil)

// task is a background sub-turn started with the delegate tool.
type task struct {
	id      int
	chat    string // channel + chat key
	what    string
	started time.Time
	cancel  context.CancelFunc
}

// New returns Tasks; the router starts it.
func New(cfg Config) *Tasks {
	if cfg.TurnTimeout <= 0 {
		cfg.TurnTimeout = router.DefaultTurnTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Tasks{cfg: cfg, log: cfg.Logger.With("component", "delegate"), run: map[int]*task{}}
}

// Start implements router.Tasks.
func (ts *Tasks) Start(ctx context.Context, chats router.Chats) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.base, ts.chats = ctx, chats
}

// Wait implements router.Tasks: it returns once no task runs.
func (ts *Tasks) Wait() { ts.wg.Wait() }

// chatKey names a chat in the tasks' list.
func chatKey(channel, chat string) string { return channel + "\x00" + chat }

func (ts *Tasks) forChat(key string) []*task {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	var out []*task
	for _, t := range ts.run {
		if t.chat == key {
			out = append(out, t)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

// Cancel implements router.Tasks: it cancels the chat's tasks and returns
// how many there were.
func (ts *Tasks) Cancel(channel, chat string) int {
	list := ts.forChat(chatKey(channel, chat))
	for _, t := range list {
		t.cancel()
	}
	return len(list)
}

// Describe implements router.Tasks: it answers /tasks.
func (ts *Tasks) Describe(channel, chat string) string {
	list := ts.forChat(chatKey(channel, chat))
	if len(list) == 0 {
		return "No background tasks are running."
	}
	var b strings.Builder
	b.WriteString("Background tasks:\n")
	for _, t := range list {
		fmt.Fprintf(&b, "#%d %s (running for %s)\n", t.id, clip(t.what, 80), time.Since(t.started).Round(time.Second))
	}
	b.WriteString("/stop cancels them.")
	return b.String()
}

var params = json.RawMessage(`{"type":"object","properties":{"task":{"type":"string","description":"what to do, self-contained: the task does not see this conversation"},"tools":{"type":"array","items":{"type":"string"},"description":"optional: the only tools the task may use"}},"required":["task"],"additionalProperties":false}`)

// Source offers the delegate tool in the turns of the chat of in; a task
// it starts reports to that chat.
func (ts *Tasks) Source(in channels.Inbound) agent.Source {
	return agent.SourceFunc{SourceName: "delegate", Fn: func(info agent.TurnInfo) []*agent.Tool {
		t := &agent.Tool{
			Name: Tool,
			Description: "Start a background task that works on its own (with its own step budget) while you go on; " +
				"its result is posted to this chat when done. Use it for long, independent work.",
			Parameters: params,
			Source:     "delegate",
			Acts:       true, // starts work of its own: asks first, or is withdrawn, after untrusted content
			Fn: func(ctx context.Context, args json.RawMessage) (string, error) {
				var a struct {
					Task  string   `json:"task"`
					Tools []string `json:"tools"`
				}
				if err := json.Unmarshal(args, &a); err != nil {
					return "", fmt.Errorf("bad arguments: %w", err)
				}
				if strings.TrimSpace(a.Task) == "" {
					return "", errors.New("task must not be empty")
				}
				id, err := ts.start(in, a.Task, a.Tools)
				if err != nil {
					return "", err
				}
				return fmt.Sprintf("Started background task #%d. Its result will be posted to the chat when it is done; you can go on.", id), nil
			},
		}
		if err := t.Compile(); err != nil {
			panic(err) // fixed schema
		}
		return []*agent.Tool{t}
	}}
}

// start runs a background sub-turn in its own session (so it never
// interleaves with the chat's transcript), with a restricted tool set and
// its own step cap; the result reaches the chat through the fallback, once.
func (ts *Tasks) start(in channels.Inbound, what string, tools []string) (int, error) {
	key := chatKey(in.Channel, in.ChatID)
	ts.mu.Lock()
	n, total := 0, len(ts.run)
	for _, t := range ts.run {
		if t.chat == key {
			n++
		}
	}
	if n >= maxTasksPerChat || total >= maxTasks {
		ts.mu.Unlock()
		return 0, fmt.Errorf("too many background tasks running (%d in this chat, %d in all); wait for one to finish", n, total)
	}
	if ts.base == nil || ts.base.Err() != nil {
		ts.mu.Unlock()
		return 0, errors.New("the gateway is shutting down")
	}
	ts.next++
	id := ts.next
	ctx, cancel := context.WithTimeout(ts.base, ts.cfg.TurnTimeout)
	t := &task{id: id, chat: key, what: what, started: time.Now(), cancel: cancel}
	ts.run[id] = t
	ts.wg.Add(1)
	ts.mu.Unlock()

	go func() {
		defer ts.wg.Done()
		defer cancel()
		defer func() {
			ts.mu.Lock()
			delete(ts.run, id)
			ts.mu.Unlock()
		}()
		ts.runTask(ctx, in, t, tools)
	}()
	return id, nil
}

func (ts *Tasks) runTask(ctx context.Context, in channels.Inbound, t *task, tools []string) {
	log := ts.log.With("channel", in.Channel, "chat", in.ChatID, "task", t.id)
	chat, err := ts.cfg.Store.EnsureChat(ctx, in.Channel, fmt.Sprintf("%s#task", in.ChatID), "task", "background tasks")
	if err != nil {
		log.Error("store task chat", "err", err)
		return
	}
	sess, err := ts.cfg.Store.NewSession(ctx, chat.ID)
	if err != nil {
		log.Error("task session", "err", err)
		return
	}
	quiet := in
	quiet.MessageID = ""
	binding := &taskChat{prefix: fmt.Sprintf("Background task #%d (%s):\n", t.id, clip(t.what, 80)), chats: ts.chats, in: quiet}
	turn := agent.Turn{
		ChatID: chat.ID, SessionID: sess.ID, Channel: in.Channel, ChatType: string(in.ChatType), ChatKey: in.ChatID,
		UserID: in.UserID, UserName: in.UserName, DisplayName: in.DisplayName, Kind: "task",
		Input:    llm.Message{Role: llm.RoleUser, Content: t.what},
		Note:     taskMarker + " The message above is a task delegated to you from a conversation, not a message from a person: work on it on your own, and reply with the result.",
		Chat:     binding,
		MaxSteps: taskMaxSteps, Location: ts.cfg.Location,
		Allow: allow(tools),
		OnEvent: func(ev agent.Event) {
			if ts.cfg.OnEvent != nil {
				ts.cfg.OnEvent(in, ev)
			}
		},
	}
	res := ts.cfg.Agent.Run(ctx, turn)
	if res.StopReason == agent.StopCancelled {
		_, _ = ts.chats.Send(context.WithoutCancel(ctx), quiet, fmt.Sprintf("Background task #%d was stopped.", t.id))
	}
	log.Info("background task done", "stop_reason", res.StopReason)
}

// taskMarker starts the gateway's note on a background task's input (a
// system message: agent.Turn.Note).
const taskMarker = "[background task]"

// allow restricts a task's tools: never delegate again (depth 1); when the
// model named tools, only those (and send_message).
func allow(tools []string) map[string]bool {
	if len(tools) == 0 {
		return nil
	}
	allow := map[string]bool{"send_message": true}
	for _, t := range tools {
		if t != Tool {
			allow[t] = true
		}
	}
	return allow
}

// taskChat is a task's view of its chat: messages go to the chat, the
// first marked as the task's result; nothing is recorded as a delivery.
type taskChat struct {
	prefix string
	chats  router.Chats
	in     channels.Inbound

	mu       sync.Mutex
	prefixed bool // the prefix went on the first message
	sent     bool // a message was sent
}

// Send implements agent.Chat.
func (c *taskChat) Send(ctx context.Context, text string) (string, error) {
	c.mu.Lock()
	in := c.in
	if c.sent {
		in.ChatType = channels.DM // reply-to only on the first message
	}
	if !c.prefixed {
		c.prefixed = true
		text = c.prefix + text
	}
	c.mu.Unlock()
	id, err := c.chats.Send(ctx, in, text)
	if err != nil {
		return "", err
	}
	c.mu.Lock()
	c.sent = true
	c.mu.Unlock()
	return id, nil
}

// clip shortens s to n runes, marking the cut.
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}
