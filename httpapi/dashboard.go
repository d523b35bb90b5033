package httpapi

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/llm"
	"github.com/switchboard-gateway/switchboard/mcpclient"
	"github.com/switchboard-gateway/switchboard/store"
)

//go:embed assets
var assets embed.FS

const (
	recentTurnsShown = 25
	chatsShown       = 200
	chatTurnsShown   = 25
	// csp allows only the server's own scripts and styles: nothing is
	// loaded from elsewhere, and injected markup cannot run.
	csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)

type pages struct {
	t *template.Template
}

// dashboardPages are the parsed templates, parsed at the first page shown
// rather than at every start (they are the same for every server).
var dashboardPages = sync.OnceValues(newPages)

func newPages() (*pages, error) {
	t, err := template.New("").Funcs(template.FuncMap{
		"ago":      agoText,
		"when":     func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") },
		"dur":      durText,
		"num":      numText,
		"clip":     func(n int, s string) string { return clipRunes(s, n) },
		"join":     strings.Join,
		"add":      func(a, b int) int { return a + b },
		"statusOf": statusClass,
	}).ParseFS(assets, "assets/*.html")
	if err != nil {
		return nil, fmt.Errorf("httpapi: dashboard templates: %w", err)
	}
	return &pages{t: t}, nil
}

func (s *Server) dashboardRoutes(mux *http.ServeMux) {
	static, _ := fs.Sub(assets, "assets/static")
	mux.Handle("GET /static/", http.StripPrefix("/static/", cacheStatic(http.FileServerFS(static))))
	mux.HandleFunc("POST /login", s.login)
	page := func(h func(w http.ResponseWriter, r *http.Request) (string, any, error)) http.Handler {
		return s.dashboard(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if s.opts.Token != "" {
				r = r.WithContext(context.WithValue(r.Context(), csrfKey{}, csrfToken(w, r)))
			}
			name, data, err := h(w, r)
			switch {
			case errors.Is(err, store.ErrNotFound):
				http.Error(w, "not found", http.StatusNotFound)
				return
			case err != nil:
				s.log.Error("dashboard page", "path", r.URL.Path, "err", err)
				http.Error(w, "the page could not be built; see the server log", http.StatusInternalServerError)
				return
			}
			s.render(w, http.StatusOK, name, data)
		}))
	}
	mux.Handle("GET /{$}", page(s.overviewPage))
	mux.Handle("GET /fragments/overview", page(s.overviewFragment))
	mux.Handle("GET /turns/{id}", page(s.turnPage))
	mux.Handle("GET /chats", page(s.chatsPage))
	mux.Handle("GET /chats/{id}", page(s.chatPage))
	mux.Handle("GET /sessions/{id}", page(s.sessionPage))
	mux.Handle("GET /pairing", page(s.pairingPage))
	mux.Handle("POST /pairing/{code}/approve", s.pairingAction(true))
	mux.Handle("POST /pairing/{code}/deny", s.pairingAction(false))
	mux.Handle("POST /pairing/revoke", s.pairingRevoke())
	mux.Handle("GET /dashboard/metrics", page(s.metricsPage))
	// The web chat, search and logout (webchat.go, search.go, auth.go).
	mux.Handle("GET /webchat", page(s.webChatPage))
	mux.Handle("POST /webchat/messages", s.dashboard(jsonOnly(http.HandlerFunc(s.webChatSend))))
	mux.Handle("GET /search", page(s.searchPage))
	mux.HandleFunc("POST /logout", s.logout)
}

func cacheStatic(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=300")
		next.ServeHTTP(w, r)
	})
}

func (s *Server) render(w http.ResponseWriter, code int, name string, data any) {
	var buf bytes.Buffer
	pg, err := dashboardPages()
	if err == nil {
		err = pg.t.ExecuteTemplate(&buf, name, data)
	}
	if err != nil {
		s.log.Error("render dashboard", "template", name, "err", err)
		http.Error(w, "the page could not be rendered; see the server log", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", csp)
	h.Set("X-Frame-Options", "DENY")
	w.WriteHeader(code)
	if s.opts.Redact != nil {
		_, _ = io.WriteString(w, s.opts.Redact(buf.String()))
		return
	}
	_, _ = w.Write(buf.Bytes())
}

func (s *Server) renderLogin(w http.ResponseWriter, r *http.Request, code int, msg string) {
	next := r.URL.RequestURI()
	if r.Method != http.MethodGet {
		next = "/"
	}
	signedOut := r.URL.Path == "/" && r.URL.Query().Has("signed_out")
	if signedOut {
		next = "/"
	}
	s.render(w, code, "login.html", map[string]any{"Title": "Sign in", "Error": msg, "Next": next, "SignedOut": signedOut,
		"CSRF": csrfToken(w, r), "Head": head{Agent: s.opts.AgentName, AuthOn: s.opts.Token != ""}}) // no model, version or uptime for strangers
}

// head is what every page shows at the top.
type head struct {
	Agent, Model, Version, Uptime string
	AuthOn                        bool
	CSRF                          string // the logout form's token (pages behind the sign-in)
	Search                        string // the search box's text
}

// csrfKey marks a page request's context with its form token.
type csrfKey struct{}

func (s *Server) head(r *http.Request) head {
	tok, _ := r.Context().Value(csrfKey{}).(string)
	return head{Agent: s.opts.AgentName, Model: s.opts.ModelName, Version: s.opts.Version,
		Uptime: durText(s.opts.Now().Sub(s.started)), AuthOn: s.opts.Token != "", CSRF: tok}
}

// turnRow is a turn with its tool calls, for tables.
type turnRow struct {
	store.Turn
	Chat  string
	Tools []toolUse
	Live  *TurnActivity
}

type toolUse struct {
	Name    string
	Args    string
	Result  string
	IsError bool
	Step    int
}

// overview is the main page's data.
type overview struct {
	Title    string
	Head     head
	CSRF     string          // for the pairing forms
	Pending  []store.Pairing // pairing requests
	Ready    Readiness
	Channels []ChannelStatus
	Live     []TurnActivity
	Recent   []turnRow
	Chart    chart
	Cost     *costChart // nil without prices
	Range    string
	Skills   *Skills
	MCP      []mcpclient.ServerStatus
	Jobs     []Job
	JobsOff  bool
	JobsErr  string
	Users    []User
	UsersOff bool
	UsersErr string
	Queue    struct{ Depth, Busy int }
	Model    struct {
		LastOK, LastFailure time.Time
		LastError           string
	}
}

func (s *Server) overviewData(r *http.Request) (*overview, error) {
	ctx := r.Context()
	ov := &overview{Title: "Overview", Head: s.head(r), Range: r.URL.Query().Get("range")}
	ov.Ready = s.Ready(ctx)
	if s.opts.Channels != nil {
		ov.Channels = s.opts.Channels()
		sort.Slice(ov.Channels, func(i, j int) bool { return ov.Channels[i].Name < ov.Channels[j].Name })
	}
	if s.opts.Activity != nil {
		for _, t := range s.opts.Activity.Snapshot() {
			if t.Running {
				ov.Live = append(ov.Live, t)
			}
		}
	}
	recent, err := s.turnRows(ctx)
	if err != nil {
		return nil, err
	}
	ov.Recent = recent
	if ov.Range != "14d" {
		ov.Range = "24h"
	}
	if ov.Chart, err = s.usageChart(ctx, ov.Range); err != nil {
		return nil, err
	}
	if ov.Cost, err = s.costData(ctx); err != nil {
		return nil, err
	}
	if s.opts.Skills != nil {
		sk := s.opts.Skills()
		ov.Skills = &sk
	}
	if s.opts.MCP != nil {
		ov.MCP = s.opts.MCP()
	}
	if s.opts.Jobs == nil {
		ov.JobsOff = true
	} else if ov.Jobs, err = s.opts.Jobs(ctx); err != nil {
		ov.JobsErr = err.Error()
	}
	if s.opts.Users == nil {
		ov.UsersOff = true
	} else if ov.Users, err = s.opts.Users(ctx); err != nil {
		ov.UsersErr = err.Error()
	}
	if s.opts.Queue != nil {
		ov.Queue.Depth, ov.Queue.Busy = s.opts.Queue()
	}
	if s.opts.Model != nil {
		h := s.opts.Model.Health()
		ov.Model.LastOK, ov.Model.LastFailure, ov.Model.LastError = h.LastOK, h.LastFailure, h.LastError
	}
	return ov, nil
}

func (s *Server) overviewPage(w http.ResponseWriter, r *http.Request) (string, any, error) {
	ov, err := s.overviewData(r)
	if err != nil {
		return "", nil, err
	}
	ov.CSRF = csrfToken(w, r)
	ov.Pending, err = s.opts.Store.PendingPairings(r.Context())
	return "overview.html", ov, err
}

func (s *Server) overviewFragment(_ http.ResponseWriter, r *http.Request) (string, any, error) {
	ov, err := s.overviewData(r)
	return "overview-live", ov, err
}

// turnRows returns the recent turns with their tool calls and chat names.
func (s *Server) turnRows(ctx context.Context) ([]turnRow, error) {
	turns, err := s.opts.Store.RecentTurns(ctx, recentTurnsShown)
	if err != nil {
		return nil, err
	}
	return s.withTools(ctx, turns)
}

// withTools adds to turns their tool calls, chat names and live activity.
func (s *Server) withTools(ctx context.Context, turns []store.Turn) ([]turnRow, error) {
	chats := map[int64]string{}
	rows := make([]turnRow, 0, len(turns))
	for _, t := range turns {
		row := turnRow{Turn: t}
		name, ok := chats[t.ChatID]
		if !ok {
			if c, err := s.opts.Store.ChatByID(ctx, t.ChatID); err == nil {
				name = c.Channel + ": " + s.chatLabel(ctx, c).Name
			}
			chats[t.ChatID] = name
		}
		row.Chat = name
		msgs, err := s.opts.Store.TurnMessages(ctx, t.ID)
		if err != nil {
			return nil, err
		}
		row.Tools = toolUses(msgs)
		if s.opts.Activity != nil {
			if live, ok := s.opts.Activity.Turn(t.ID); ok {
				row.Live = &live
			}
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// label is how a chat is named for people.
type label struct {
	Name   string // a group's title; in a private chat, the person's name
	Handle string // the person's @username, when known
}

// chatLabel names a chat: a group by its title; otherwise by who wrote in
// it (the display name and @username of the message behind its newest
// turn); failing both, by its key on the platform.
func (s *Server) chatLabel(ctx context.Context, c store.Chat) label {
	if c.Title != "" {
		return label{Name: c.Title}
	}
	l := label{Name: c.Key}
	payload, err := s.opts.Store.LastInbound(ctx, c.ID)
	if err != nil {
		if !errors.Is(err, store.ErrNotFound) {
			s.log.Warn("dashboard: name of chat", "chat", c.ID, "err", err)
		}
		return l
	}
	var in channels.Inbound
	if err := json.Unmarshal(payload, &in); err != nil {
		return l
	}
	if in.UserName != "" {
		l.Handle = "@" + in.UserName
		l.Name = l.Handle
	}
	if in.DisplayName != "" && in.DisplayName != in.UserName {
		l.Name = in.DisplayName
	}
	if l.Handle == l.Name {
		l.Handle = ""
	}
	return l
}

// chatRow is a chat as the chats list shows it.
type chatRow struct {
	store.ChatSummary
	label
}

// toolUses pairs the tool calls of a turn's assistant messages with their
// results.
func toolUses(msgs []store.Message) []toolUse {
	var out []toolUse
	index := map[string]int{}
	step := 0
	for _, m := range msgs {
		switch m.Role {
		case llm.RoleAssistant:
			step++
			clear(index) // results follow their step: some servers reuse call ids across steps
			for _, c := range m.ToolCalls {
				index[c.ID] = len(out)
				out = append(out, toolUse{Name: c.Name, Args: c.Arguments, Step: step})
			}
		case llm.RoleTool:
			if i, ok := index[m.ToolCallID]; ok {
				out[i].Result = m.Content
				out[i].IsError = looksLikeToolError(m.Content)
			}
		}
	}
	return out
}

// looksLikeToolError recognises the loop's error results ("error: ...").
func looksLikeToolError(result string) bool {
	r := strings.ToLower(strings.TrimSpace(result))
	return strings.HasPrefix(r, "error") || strings.HasPrefix(r, "tool error")
}

// stepView is one step of a turn for the turn page.
type stepView struct {
	N        int
	Text     string
	Tools    []toolUse
	Hidden   bool
	Messages []store.Message
}

func (s *Server) turnPage(_ http.ResponseWriter, r *http.Request) (string, any, error) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		return "", nil, store.ErrNotFound
	}
	ctx := r.Context()
	t, err := s.opts.Store.Turn(ctx, id)
	if err != nil {
		return "", nil, err
	}
	msgs, err := s.opts.Store.TurnMessages(ctx, id)
	if err != nil {
		return "", nil, err
	}
	steps, err := s.opts.Store.StepUsages(ctx, id)
	if err != nil {
		return "", nil, err
	}
	data := map[string]any{"Title": fmt.Sprintf("Turn %d", id), "Head": s.head(r), "Turn": t, "Messages": msgs,
		"Tools": toolUses(msgs), "StepUsage": steps}
	if cost, ok := s.opts.Prices.Cost(t.Model, t.Usage); ok {
		data["Cost"] = s.opts.Prices.Format(cost)
	}
	if c, err := s.opts.Store.ChatByID(ctx, t.ChatID); err == nil {
		data["Chat"], data["Label"] = c, s.chatLabel(ctx, c)
	}
	if s.opts.Activity != nil {
		if live, ok := s.opts.Activity.Turn(id); ok {
			data["Live"] = live
		}
	}
	return "turn.html", data, nil
}

func (s *Server) chatsPage(_ http.ResponseWriter, r *http.Request) (string, any, error) {
	chats, err := s.opts.Store.Chats(r.Context(), chatsShown)
	if err != nil {
		return "", nil, err
	}
	rows := make([]chatRow, len(chats))
	for i, c := range chats {
		rows[i] = chatRow{ChatSummary: c, label: s.chatLabel(r.Context(), c.Chat)}
	}
	return "chats.html", map[string]any{"Title": "Chats", "Head": s.head(r), "Chats": rows}, nil
}

func (s *Server) chatPage(_ http.ResponseWriter, r *http.Request) (string, any, error) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		return "", nil, store.ErrNotFound
	}
	c, err := s.opts.Store.ChatByID(r.Context(), id)
	if err != nil {
		return "", nil, err
	}
	ctx := r.Context()
	sessions, err := s.opts.Store.Sessions(ctx, id)
	if err != nil {
		return "", nil, err
	}
	turns, err := s.opts.Store.Turns(ctx, id, chatTurnsShown)
	if err != nil {
		return "", nil, err
	}
	rows, err := s.withTools(ctx, turns)
	if err != nil {
		return "", nil, err
	}
	l := s.chatLabel(ctx, c)
	return "chat.html", map[string]any{"Title": l.Name, "Head": s.head(r), "Chat": c, "Label": l,
		"Sessions": sessions, "Turns": rows}, nil
}

func (s *Server) sessionPage(_ http.ResponseWriter, r *http.Request) (string, any, error) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		return "", nil, store.ErrNotFound
	}
	ctx := r.Context()
	sess, err := s.opts.Store.Session(ctx, id)
	if err != nil {
		return "", nil, err
	}
	c, err := s.opts.Store.ChatByID(ctx, sess.ChatID)
	if err != nil {
		return "", nil, err
	}
	msgs, err := s.opts.Store.Messages(ctx, id)
	if err != nil {
		return "", nil, err
	}
	return "session.html", map[string]any{"Title": fmt.Sprintf("Session %d", id), "Head": s.head(r),
		"Chat": c, "Session": sess, "Messages": msgs}, nil
}

func agoText(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	d := time.Since(t)
	if d < 0 {
		return "in " + durText(-d)
	}
	return durText(d) + " ago"
}

func durText(d time.Duration) string {
	switch {
	case d < time.Second:
		return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
	case d < time.Minute:
		return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + "s"
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

func numText(n int) string {
	switch {
	case n >= 10_000_000:
		return strconv.Itoa(n/1_000_000) + "M"
	case n >= 10_000:
		return strconv.Itoa(n/1000) + "k"
	}
	return strconv.Itoa(n)
}

func clipRunes(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}

// statusClass maps a status or state to a CSS class: a turn's status
// (store.Turn*), a channel's state, a job run's outcome (store.Run*) or a
// stop reason.
func statusClass(s string) string {
	switch s {
	case string(store.TurnCompleted), StateConnected, string(store.RunOK), string(agent.StopEndTurn):
		return "ok"
	case string(store.TurnRunning), StateStarting:
		return "busy"
	case string(store.TurnCancelled), StateStopped:
		return "muted"
	}
	return "bad"
}
