package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/switchboard-gateway/switchboard/cluster"
	"github.com/switchboard-gateway/switchboard/internal/testkit"
)

// flakyStore fails Ping while broken is set.
type flakyStore struct {
	Store
	broken atomic.Bool
}

func (f *flakyStore) Ping(ctx context.Context) error {
	if f.broken.Load() {
		return errors.New("store: ping: disk I/O error")
	}
	return f.Store.Ping(ctx)
}

func readiness(t *testing.T, s *stack) (int, Readiness) {
	t.Helper()
	code, body := s.do("GET", "/readyz", "", nil)
	var rd Readiness
	if err := json.Unmarshal([]byte(body), &rd); err != nil {
		t.Fatalf("readyz body %q: %v", body, err)
	}
	return code, rd
}

func TestHealthAndReadiness(t *testing.T) {
	var (
		mu    sync.Mutex
		chans = []ChannelStatus{{Name: "telegram", State: StateConnected}, {Name: "discord", State: StateConnected}}
	)
	var probeErr atomic.Value // error or nil
	probes := atomic.Int32{}
	var fs *flakyStore
	s := newStack(t, func(o *Options) {
		fs = &flakyStore{Store: o.Store}
		o.Store = fs
		o.Channels = func() []ChannelStatus {
			mu.Lock()
			defer mu.Unlock()
			return append([]ChannelStatus(nil), chans...)
		}
		o.Probe = func(ctx context.Context) error {
			probes.Add(1)
			if e, _ := probeErr.Load().(error); e != nil {
				return e
			}
			return nil
		}
	})

	code, body := s.do("GET", "/healthz", "", nil)
	if code != http.StatusOK || body != "ok" {
		t.Fatalf("healthz: %d %q, want 200 \"ok\"", code, body)
	}

	// No model call yet: the readiness check probes the model server once.
	code, rd := readiness(t, s)
	if code != http.StatusOK || !rd.Ready || !rd.Checks["store"].OK || !rd.Checks["channels"].OK || !rd.Checks["model"].OK {
		t.Fatalf("readyz = %d %+v, want ready", code, rd)
	}
	if got := probes.Load(); got != 1 {
		t.Fatalf("probes = %d, want 1", got)
	}
	// A second check within 30s reuses the probe.
	if code, _ := readiness(t, s); code != http.StatusOK || probes.Load() != 1 {
		t.Fatalf("second readyz: %d, probes %d", code, probes.Load())
	}

	// A channel waiting to retry makes the gateway unready, and says why.
	mu.Lock()
	chans[1] = ChannelStatus{Name: "discord", State: StateRetrying, LastError: "discord: connect to gateway: 4004 authentication failed"}
	mu.Unlock()
	code, rd = readiness(t, s)
	if code != http.StatusServiceUnavailable || rd.Ready || rd.Checks["channels"].OK ||
		!strings.Contains(rd.Channels["discord"].Detail, "4004") || !rd.Channels["telegram"].OK {
		t.Fatalf("readyz with discord down = %d %+v", code, rd)
	}
	mu.Lock()
	chans[1].State = StateConnected
	mu.Unlock()

	// A store that does not take writes.
	fs.broken.Store(true)
	code, rd = readiness(t, s)
	if code != http.StatusServiceUnavailable || rd.Checks["store"].OK || !strings.Contains(rd.Checks["store"].Detail, "disk I/O") {
		t.Fatalf("readyz with a broken store = %d %+v", code, rd)
	}
	fs.broken.Store(false)

	// A failed model call after the probe: the next check probes again,
	// and a failing probe makes the gateway unready.
	s.fake.Push(testkit.Reply{Status: 503})
	probeErr.Store(errors.New("llm: status 503: overloaded"))
	if got, _ := s.chat("ada", "hello"); !strings.Contains(got, "language model") {
		t.Fatalf("reply to a failed model call = %q", got)
	}
	code, rd = readiness(t, s)
	if code != http.StatusServiceUnavailable || rd.Checks["model"].OK || !strings.Contains(rd.Checks["model"].Detail, "overloaded") {
		t.Fatalf("readyz after a model failure = %d %+v", code, rd)
	}
	if probes.Load() != 2 {
		t.Fatalf("probes = %d, want 2", probes.Load())
	}
	// A successful turn makes the model reachable again without a probe.
	s.fake.Push(testkit.Reply{Text: "back"})
	if got, _ := s.chat("ada", "again"); got != "back" {
		t.Fatalf("reply = %q", got)
	}
	if code, rd = readiness(t, s); code != http.StatusOK || !strings.HasPrefix(rd.Checks["model"].Detail, "last answered") {
		t.Fatalf("readyz after a good turn = %d %+v", code, rd)
	}

	// Shutting down: not ready, while health stays up.
	s.srv.Drain()
	if code, rd = readiness(t, s); code != http.StatusServiceUnavailable || rd.Checks["shutdown"].OK {
		t.Fatalf("readyz while draining = %d %+v", code, rd)
	}
	if code, _ := s.do("GET", "/healthz", "", nil); code != http.StatusOK {
		t.Fatalf("healthz while draining = %d", code)
	}
}

// Among replicas, /readyz says which replica answers, its roles and how
// many chats it holds; a replica whose heartbeat lapsed is not ready. A
// channel another replica runs (standby) counts as ready.
func TestReadinessCluster(t *testing.T) {
	var healthy atomic.Bool
	healthy.Store(true)
	s := newStack(t, func(o *Options) {
		o.Channels = func() []ChannelStatus {
			return []ChannelStatus{{Name: "telegram", State: StateStandby}}
		}
		o.Cluster = func(context.Context) (cluster.Status, error) {
			return cluster.Status{Replica: "gw-2", Roles: []string{"scheduler"}, Chats: 7, Heartbeat: "1s", Healthy: healthy.Load()}, nil
		}
	})
	code, rd := readiness(t, s)
	if code != http.StatusOK || rd.Cluster == nil || rd.Cluster.Replica != "gw-2" || rd.Cluster.Chats != 7 ||
		len(rd.Cluster.Roles) != 1 || !rd.Checks["cluster"].OK || !rd.Channels["telegram"].OK {
		t.Fatalf("readyz = %d %+v %+v", code, rd, rd.Cluster)
	}
	healthy.Store(false)
	if code, rd = readiness(t, s); code != http.StatusServiceUnavailable || rd.Checks["cluster"].OK {
		t.Fatalf("readyz with a lapsed heartbeat = %d %+v", code, rd)
	}
}

func TestAuthRule(t *testing.T) {
	s := newStack(t, func(o *Options) { o.Token = testToken })
	s.token = "" // send no token unless a case does

	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(path string, header map[string]string) int {
		req, _ := http.NewRequestWithContext(t.Context(), "GET", s.url+path, nil)
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	bearer := map[string]string{"Authorization": "Bearer " + testToken}
	wrong := map[string]string{"Authorization": "Bearer not-the-token"}
	tests := []struct {
		path   string
		header map[string]string
		want   int
	}{
		{"/healthz", nil, http.StatusOK},
		{"/readyz", nil, http.StatusUnauthorized},
		{"/readyz", wrong, http.StatusUnauthorized},
		{"/readyz", bearer, http.StatusOK},
		{"/metrics", nil, http.StatusUnauthorized},
		{"/metrics", bearer, http.StatusOK},
		{"/v1/models", nil, http.StatusUnauthorized},
		{"/v1/models", map[string]string{"Authorization": "bearer " + testToken}, http.StatusOK},
		{"/", nil, http.StatusUnauthorized}, // the login form
		{"/", bearer, http.StatusOK},
		{"/chats", nil, http.StatusUnauthorized},
		{"/static/style.css", nil, http.StatusOK}, // assets hold no data
	}
	for _, tt := range tests {
		if got := get(tt.path, tt.header); got != tt.want {
			t.Errorf("GET %s with %v: %d, want %d", tt.path, tt.header, got, tt.want)
		}
	}
	code, body := s.do("POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}]}`, nil)
	if code != http.StatusUnauthorized || !strings.Contains(body, "invalid_api_key") {
		t.Errorf("chat without a token: %d %s", code, body)
	}

	// The login form sets a cookie that opens the dashboard, not the API.
	// It is posted with the form's CSRF token and cookie.
	csrf, csrfCookie := loginForm(t, s.url)
	form := url.Values{"token": {"wrong"}, "next": {"/chats"}, "csrf": {csrf}}
	resp := postLogin(t, client, s.url, form, csrfCookie)
	if resp.StatusCode != http.StatusUnauthorized || len(resp.Cookies()) != 0 {
		t.Fatalf("wrong login: %d, cookies %v", resp.StatusCode, resp.Cookies())
	}
	form.Set("token", testToken)
	resp = postLogin(t, client, s.url, form, csrfCookie)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/chats" || len(resp.Cookies()) != 1 {
		t.Fatalf("login: %d, location %q, cookies %v", resp.StatusCode, resp.Header.Get("Location"), resp.Cookies())
	}
	c := resp.Cookies()[0]
	if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || strings.Contains(c.Value, testToken) {
		t.Fatalf("session cookie %+v: want HttpOnly, SameSite=Strict, without the token", c)
	}
	cookie := map[string]string{"Cookie": c.Name + "=" + c.Value}
	if got := get("/chats", cookie); got != http.StatusOK {
		t.Errorf("dashboard with the cookie: %d", got)
	}
	if got := get("/v1/models", cookie); got != http.StatusUnauthorized {
		t.Errorf("API with only the cookie: %d, want 401", got)
	}
	// An open redirect through next is refused.
	form.Set("next", "//evil.example/")
	resp = postLogin(t, client, s.url, form, csrfCookie)
	if loc := resp.Header.Get("Location"); loc != "/" {
		t.Errorf("login with next=//evil.example/ redirects to %q, want /", loc)
	}
}

func TestLoopbackRule(t *testing.T) {
	for _, tt := range []struct {
		addr string
		want bool
	}{
		{"127.0.0.1:8080", true}, {"127.3.4.5:1", true}, {"[::1]:8080", true}, {"localhost:80", true},
		{"0.0.0.0:8080", false}, {":8080", false}, {"192.168.1.2:8080", false}, {"[::]:8080", false}, {"example.com:80", false},
	} {
		if got := IsLoopback(tt.addr); got != tt.want {
			t.Errorf("IsLoopback(%q) = %v, want %v", tt.addr, got, tt.want)
		}
	}
	st := &flakyStore{}
	if _, err := New(Options{Listen: "0.0.0.0:8080", Store: st}); err == nil || !strings.Contains(err.Error(), "token") {
		t.Fatalf("New off loopback without a token: %v", err)
	}
	if _, err := New(Options{Listen: "0.0.0.0:8080", Token: "t0ken-long-enough", Store: st}); err != nil {
		t.Fatalf("New off loopback with a token: %v", err)
	}
}

func TestMetricsAfterScriptedTurn(t *testing.T) {
	s := newStack(t, nil)
	s.scriptToolTurn("It is tea time.")
	if got, _ := s.chat("ada", "What time is it?"); got != "It is tea time." {
		t.Fatalf("reply = %q", got)
	}
	code, body := s.do("GET", "/metrics", "", nil)
	if code != http.StatusOK {
		t.Fatalf("metrics: %d", code)
	}
	for _, want := range []string{
		`switchboard_turns_total{channel="http",stop_reason="end_turn"} 1`,
		`switchboard_turn_steps_sum{channel="http"} 2`,
		`switchboard_tool_calls_total{outcome="ok",tool="current_time"} 1`,
		`switchboard_model_request_duration_seconds_count{model="fake-model",outcome="ok"} 2`,
		`switchboard_model_tokens_total{kind="prompt",model="fake-model"} 270`,
		`switchboard_model_tokens_total{kind="completion",model="fake-model"} 20`,
		`switchboard_messages_sent_total{channel="http"} 1`,
		"switchboard_queue_depth 0",
		"switchboard_busy_chats",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	if t.Failed() {
		t.Logf("metrics:\n%s", grepLines(body, "switchboard_"))
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// The server mounts the chat API's routes behind its token, and its
// Shutdown answers the chat requests still waiting (Abandon) before it
// stops.
func TestChatAPIMounted(t *testing.T) {
	api := &fakeChatAPI{}
	// httptest.NewRequest's Host is example.com.
	srv, err := New(Options{Store: &flakyStore{}, Token: testToken, API: api, PublicHosts: []string{"example.com"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		method, path, auth string
		want               int
	}{
		{"GET", "/v1/models", "Bearer " + testToken, http.StatusTeapot},
		{"GET", "/v1/models", "", http.StatusUnauthorized},
		{"POST", "/v1/models", "Bearer " + testToken, http.StatusMethodNotAllowed},
	} {
		req := httptest.NewRequest(tt.method, tt.path, nil)
		if tt.auth != "" {
			req.Header.Set("Authorization", tt.auth)
		}
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, req)
		if rec.Code != tt.want {
			t.Errorf("%s %s with %q: %d, want %d", tt.method, tt.path, tt.auth, rec.Code, tt.want)
		}
	}
	if api.abandoned.Load() {
		t.Fatal("abandoned before the shutdown")
	}
	if err := srv.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !api.abandoned.Load() {
		t.Fatal("Shutdown did not abandon the waiting chat requests")
	}
}

type fakeChatAPI struct{ abandoned atomic.Bool }

func (f *fakeChatAPI) Routes() map[string]http.Handler {
	return map[string]http.Handler{"GET /v1/models": http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusTeapot)
	})}
}

func (f *fakeChatAPI) Abandon() { f.abandoned.Store(true) }

// The dashboard's pages, without a browser: what they list, their headers,
// and pages that do not exist.
func TestDashboardPages(t *testing.T) {
	s := newStack(t, func(o *Options) {
		o.Channels = func() []ChannelStatus {
			return []ChannelStatus{{Name: "telegram", State: StateRetrying, LastError: "telegram: getMe: 401 Unauthorized", Restarts: 2}}
		}
		o.Skills = func() Skills {
			return Skills{Loaded: []Skill{{Name: "weather", Description: "Looks up the weather", File: "weather.yaml"}},
				Problems: []string{"broken.yaml:3: tools[0].url: must be https"}}
		}
		o.Jobs = func(context.Context) ([]Job, error) {
			return []Job{{Name: "#1 digest (task, active)", Schedule: "0 9 * * *", Chat: "telegram 42", LastOutcome: "ok"}}, nil
		}
	})
	s.scriptToolTurn("It is <b>tea</b> time.")
	s.chat("ada", "What time is it? <script>alert(1)</script>")

	code, page := s.do("GET", "/", "", nil)
	if code != http.StatusOK {
		t.Fatalf("overview: %d", code)
	}
	for _, want := range []string{
		`data-channel="telegram"`, "retrying", "getMe: 401", // channel status
		"weather.yaml", "broken.yaml:3: tools[0].url: must be https", // skills and their errors
		"#1 digest (task, active)", "0 9 * * *", // scheduled jobs
		"Profiles and memories are not part of this build", // no users provider
		`id="usage-chart"`, `data-total="290"`, "290 tokens", // the chart
		"current_time", "http: ada", // the turn
	} {
		if !strings.Contains(page, want) {
			t.Errorf("overview lacks %q", want)
		}
	}
	code, page = s.do("GET", "/chats", "", nil)
	if code != http.StatusOK || !strings.Contains(page, `href="/chats/1"`) || !strings.Contains(page, "ada") {
		t.Errorf("chats page: %d\n%s", code, page)
	}
	code, page = s.do("GET", "/chats/1", "", nil)
	if code != http.StatusOK || !strings.Contains(page, `href="/sessions/1"`) {
		t.Errorf("chat page: %d", code)
	}
	code, page = s.do("GET", "/sessions/1", "", nil)
	if code != http.StatusOK || !strings.Contains(page, "&lt;script&gt;alert(1)&lt;/script&gt;") ||
		strings.Contains(page, "<script>alert(1)") || !strings.Contains(page, "It is &lt;b&gt;tea&lt;/b&gt; time.") {
		t.Errorf("transcript page: %d (the messages must be there, escaped)\n%s", code, page)
	}
	for _, path := range []string{"/turns/999", "/sessions/999", "/chats/999", "/turns/x", "/nope"} {
		if code, _ := s.do("GET", path, "", nil); code != http.StatusNotFound {
			t.Errorf("GET %s = %d, want 404", path, code)
		}
	}
	resp, err := http.Get(s.url + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe") {
		t.Errorf("CSP = %q", csp)
	}
	if got := resp.Header.Get("X-Frame-Options"); got != "DENY" {
		t.Errorf("X-Frame-Options = %q", got)
	}
	// The fragment the page refreshes itself with.
	if code, frag := s.do("GET", "/fragments/overview", "", nil); code != http.StatusOK || !strings.Contains(frag, `id="recent"`) || strings.Contains(frag, "<html") {
		t.Errorf("fragment: %d", code)
	}
}

// /readyz follows the chat completions, not only the model server's GET
// /models: while every completion fails for want of the server (here 503s,
// while /models answers), the gateway is not ready and says why; one
// completion that succeeds makes it ready again.
func TestReadinessFollowsCompletions(t *testing.T) {
	s := newStack(t, nil)
	if code, rd := readiness(t, s); code != http.StatusOK || !rd.Checks["model"].OK {
		t.Fatalf("readyz before any completion = %d %+v, want ready (the probe answers)", code, rd)
	}
	for i := range 3 {
		s.fake.Push(testkit.Reply{Status: 503, ErrorMessage: "upstream connect error"})
		if got, _ := s.chat("ada", "hello"); !strings.Contains(got, "language model") {
			t.Fatalf("reply %d to a failed completion = %q", i, got)
		}
		code, rd := readiness(t, s)
		if i < 2 && code != http.StatusOK && !strings.Contains(rd.Checks["model"].Detail, "probe") {
			t.Fatalf("readyz after %d failed completion(s) = %d %+v, want the probe's word", i+1, code, rd)
		}
		if i == 2 {
			m := rd.Checks["model"]
			if code != http.StatusServiceUnavailable || rd.Ready || m.OK ||
				!strings.Contains(m.Detail, "the last 3 chat completions failed") || !strings.Contains(m.Detail, "upstream connect error") {
				t.Fatalf("readyz after 3 failed completions = %d %+v, want 503 with the reason", code, rd)
			}
		}
	}
	s.fake.Push(testkit.Reply{Text: "back"})
	if got, _ := s.chat("ada", "again"); got != "back" {
		t.Fatalf("reply = %q", got)
	}
	if code, rd := readiness(t, s); code != http.StatusOK || !rd.Ready || !strings.HasPrefix(rd.Checks["model"].Detail, "last answered") {
		t.Fatalf("readyz after a completion that succeeded = %d %+v, want ready", code, rd)
	}
}
