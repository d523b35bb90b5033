package router

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"switchboard/agent"
	"switchboard/channels"
	"switchboard/llm"
)

// Delegation limits.
const (
	// DelegateTool is the tool that starts a background task.
	DelegateTool = "delegate"
	// maxTasksPerChat and maxTasks bound background work so one chat (or a
	// runaway model) cannot flood the model or the machine.
	maxTasksPerChat = 2
	maxTasks        = 8
	// taskMaxSteps caps a background task's own loop.
	taskMaxSteps = 15
)

// task is a background sub-turn started with the delegate tool.
type task struct {
	id      int
	chat    string // channel + chat key
	what    string
	started time.Time
	cancel  context.CancelFunc
}

// tasks tracks running background tasks.
type tasks struct {
	mu   sync.Mutex
	next int
	run  map[int]*task
	wg   sync.WaitGroup
}

func (ts *tasks) forChat(key string) []*task {
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

// cancelChat cancels the chat's tasks and returns how many there were.
func (ts *tasks) cancelChat(key string) int {
	list := ts.forChat(key)
	for _, t := range list {
		t.cancel()
	}
	return len(list)
}

var delegateParams = json.RawMessage(`{"type":"object","properties":{"task":{"type":"string","description":"what to do, self-contained: the task does not see this conversation"},"tools":{"type":"array","items":{"type":"string"},"description":"optional: the only tools the task may use"}},"required":["task"],"additionalProperties":false}`)

// delegateSource offers the delegate tool in a chat's user turns.
func (r *Router) delegateSource(in channels.Inbound) agent.Source {
	return agent.SourceFunc{SourceName: "delegate", Fn: func(info agent.TurnInfo) []*agent.Tool {
		t := &agent.Tool{
			Name: DelegateTool,
			Description: "Start a background task that works on its own (with its own step budget) while you go on; " +
				"its result is posted to this chat when done. Use it for long, independent work.",
			Parameters: delegateParams,
			Source:     "delegate",
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
				id, err := r.startTask(in, a.Task, a.Tools)
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

// startTask runs a background sub-turn in its own session (so it never
// interleaves with the chat's transcript), with a restricted tool set and
// its own step cap; the result reaches the chat through the fallback, once.
func (r *Router) startTask(in channels.Inbound, what string, tools []string) (int, error) {
	key := chatKey(in.Channel, in.ChatID)
	r.tasks.mu.Lock()
	n, total := 0, len(r.tasks.run)
	for _, t := range r.tasks.run {
		if t.chat == key {
			n++
		}
	}
	if n >= maxTasksPerChat || total >= maxTasks {
		r.tasks.mu.Unlock()
		return 0, fmt.Errorf("too many background tasks running (%d in this chat, %d in all); wait for one to finish", n, total)
	}
	if r.base == nil || r.base.Err() != nil {
		r.tasks.mu.Unlock()
		return 0, errors.New("the gateway is shutting down")
	}
	r.tasks.next++
	id := r.tasks.next
	ctx, cancel := context.WithTimeout(r.base, r.cfg.TurnTimeout)
	t := &task{id: id, chat: key, what: what, started: time.Now(), cancel: cancel}
	if r.tasks.run == nil {
		r.tasks.run = map[int]*task{}
	}
	r.tasks.run[id] = t
	r.tasks.wg.Add(1)
	r.tasks.mu.Unlock()

	go func() {
		defer r.tasks.wg.Done()
		defer cancel()
		defer func() {
			r.tasks.mu.Lock()
			delete(r.tasks.run, id)
			r.tasks.mu.Unlock()
		}()
		r.runTask(ctx, in, t, tools)
	}()
	return id, nil
}

func (r *Router) runTask(ctx context.Context, in channels.Inbound, t *task, tools []string) {
	log := r.log.With("channel", in.Channel, "chat", in.ChatID, "task", t.id)
	chat, err := r.cfg.Store.EnsureChat(ctx, in.Channel, fmt.Sprintf("%s#task", in.ChatID), "task", "background tasks")
	if err != nil {
		log.Error("store task chat", "err", err)
		return
	}
	sess, err := r.cfg.Store.NewSession(ctx, chat.ID)
	if err != nil {
		log.Error("task session", "err", err)
		return
	}
	quiet := in
	quiet.MessageID = ""
	var once sync.Once
	header := fmt.Sprintf("Background task #%d (%s):\n", t.id, clip(t.what, 80))
	binding := &prefixChat{prefix: header, once: &once, inner: &chatBinding{r: r, in: quiet, log: log,
		delivered: func(context.Context, int64, string) {}}}
	turn := agent.Turn{
		ChatID: chat.ID, SessionID: sess.ID, Channel: in.Channel, ChatType: string(in.ChatType), ChatKey: in.ChatID,
		UserID: in.UserID, UserName: in.UserName, DisplayName: in.DisplayName, Kind: "task",
		Input:    llm.Message{Role: llm.RoleUser, Content: "[background task]\n" + t.what + "\n\nWork on your own; reply with the result."},
		Chat:     binding,
		MaxSteps: taskMaxSteps, Location: r.cfg.Location,
		Allow: taskAllow(tools),
		OnEvent: func(ev agent.Event) {
			if r.cfg.OnEvent != nil {
				r.cfg.OnEvent(in, ev)
			}
		},
	}
	res := r.cfg.Agent.Run(ctx, turn)
	if res.StopReason == agent.StopCancelled {
		_, _ = r.send(context.WithoutCancel(ctx), quiet, fmt.Sprintf("Background task #%d was stopped.", t.id))
	}
	log.Info("background task done", "stop_reason", res.StopReason)
}

// taskAllow restricts a task's tools: never delegate again (depth 1); when
// the model named tools, only those (and send_message).
func taskAllow(tools []string) map[string]bool {
	if len(tools) == 0 {
		return nil
	}
	allow := map[string]bool{"send_message": true}
	for _, t := range tools {
		if t != DelegateTool {
			allow[t] = true
		}
	}
	return allow
}

// prefixChat marks the first message of a background task's result.
type prefixChat struct {
	prefix string
	once   *sync.Once
	inner  agent.Chat
}

func (p *prefixChat) Send(ctx context.Context, text string) (string, error) {
	p.once.Do(func() { text = p.prefix + text })
	return p.inner.Send(ctx, text)
}

// tasksText answers /tasks.
func (r *Router) tasksText(in channels.Inbound) string {
	list := r.tasks.forChat(chatKey(in.Channel, in.ChatID))
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
