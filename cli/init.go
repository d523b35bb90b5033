package cli

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"

	"golang.org/x/term"

	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/channels/registry"
	"github.com/switchboard-gateway/switchboard/config"
	"github.com/switchboard-gateway/switchboard/httpapi"
	"github.com/switchboard-gateway/switchboard/llm"
)

// initOptions are the flags of `switchboard init`. They are parsed with
// the global flags (so they may come before or after the command) and are
// refused for any other command.
type initOptions struct {
	modelURL, model, apiKey        string
	channels                       map[string]*channelFlags // by name, for each platform with init questions
	httpListen                     string
	nonInteractive, force, noCheck bool

	given map[string]bool // the init flags on the command line
}

// channelFlags are one chat platform's init flags: --NAME-token,
// --NAME-user and its API address flag (channels.Init.APIFlag).
type channelFlags struct {
	token, user, api string
	more             map[string]*string // Init.More's flags by key
}

// initChannels are the platforms init asks about, in the registry's order.
func initChannels() []channels.Definition {
	var out []channels.Definition
	for _, d := range registry.All {
		if d.Init != nil {
			out = append(out, d)
		}
	}
	return out
}

// register declares the init flags on the command line's flag set.
func (o *initOptions) register(fs *flag.FlagSet) {
	fs.StringVar(&o.modelURL, "model-url", "", "init: the OpenAI-compatible API (default OPENAI_BASE_URL, else https://api.openai.com/v1)")
	fs.StringVar(&o.model, "model", "", "init: the model (default OPENAI_MODEL)")
	fs.StringVar(&o.apiKey, "api-key", "", "init: the model server's API key (default OPENAI_API_KEY)")
	o.channels = map[string]*channelFlags{}
	for _, d := range initChannels() {
		f := &channelFlags{}
		o.channels[d.Name] = f
		fs.StringVar(&f.token, d.Name+"-token", "", "init: "+d.Init.TokenUsage)
		fs.StringVar(&f.user, d.Name+"-user", "", "init: "+d.Init.UserUsage)
		fs.StringVar(&f.api, d.Name+"-"+d.Init.APIFlag, "", "init: "+d.Init.APIUsage)
		f.more = map[string]*string{}
		for _, m := range d.Init.More {
			f.more[m.Key] = fs.String(d.Name+"-"+m.Flag, "", "init: "+m.Usage)
		}
	}
	fs.StringVar(&o.httpListen, "http-listen", "", "init: the HTTP API and dashboard address (default 127.0.0.1:8080)")
	fs.BoolVar(&o.nonInteractive, "non-interactive", false, "init: ask nothing; take the flags and the environment")
	fs.BoolVar(&o.force, "force", false, "init: replace an existing file")
	fs.BoolVar(&o.noCheck, "no-check", false, "init: write without checking the model server and the tokens")
}

// collect records which init flags the command line gave and returns the
// first of them ("" if none), for a command that takes none.
func (o *initOptions) collect(fs *flag.FlagSet) string {
	o.given = map[string]bool{}
	first := ""
	fs.Visit(func(f *flag.Flag) {
		if strings.HasPrefix(f.Usage, "init: ") {
			o.given[f.Name] = true
			if first == "" {
				first = f.Name
			}
		}
	})
	return first
}

// secret is a token or key: typed or given by flag (written into the file)
// or taken from an environment variable (the file refers to the variable).
type secret struct {
	value string
	env   string // the variable value came from, if it did
}

// channelSetup is what init writes for one chat channel.
type channelSetup struct {
	def   channels.Definition
	token secret // empty: the channel stays off
	api   string // the API endpoint; empty: the default
	users []string
	more  map[string]secret // Init.More's answers by key
}

// answers are the setup as its definition's Init takes them.
func (c *channelSetup) answers() channels.InitAnswers {
	more := map[string]string{}
	for k, v := range c.more {
		if v.value != "" {
			more[k] = v.value
		}
	}
	return channels.InitAnswers{Token: c.token.value, API: c.api, Users: c.users, More: more}
}

// setup is the configuration init writes.
type setup struct {
	modelURL, model, httpListen string
	apiKey                      secret
	// httpToken guards an HTTP server beyond loopback: from
	// SWITCHBOARD_HTTP_TOKEN, or made up by init.
	httpToken secret
	channels  []*channelSetup // in the registry's order
}

// initCommand is `switchboard init`: it writes a first configuration to
// path (./config.yaml by default), checked against the model server and
// the platforms, never over an existing file unless --force.
func initCommand(ctx context.Context, path string, o *initOptions, stdio Stdio) int {
	if path == "" {
		path = config.DefaultPath
	}
	fail := func(code int, format string, args ...any) int {
		fmt.Fprintf(stdio.Err, "switchboard init: "+format+"\n", args...)
		return code
	}
	if _, err := os.Lstat(path); err == nil && !o.force {
		return fail(ExitConfig, "%s already exists; not overwriting it (run again with --force to replace it, or with --config PATH to write elsewhere)", path)
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fail(ExitFail, "%v", err)
	}
	s, err := o.setup()
	if err != nil {
		return fail(ExitConfig, "%v", err)
	}
	if o.nonInteractive {
		if s.model == "" {
			return fail(ExitConfig, "--model is required (or OPENAI_MODEL in the environment)")
		}
		if err := s.config().Validate(); err != nil {
			return fail(ExitConfig, "these settings do not make a valid configuration:\n%v", err)
		}
		if !o.noCheck {
			for _, c := range s.checks() {
				if f := c.run(ctx, s); f != nil {
					fmt.Fprintf(stdio.Err, "switchboard init: %s: %s\n  fix: %s\nnothing was written\n", c.what, f.Message, c.fix(f))
					return ExitFail
				}
				fmt.Fprintf(stdio.Out, "ok  %s\n", c.what)
			}
		}
	} else {
		in := newPrompter(stdio)
		if err := in.interview(ctx, path, s, o); err != nil {
			return fail(ExitFail, "%v; nothing was written", err)
		}
	}
	if err := writeConfigFile(path, s.yaml()); err != nil {
		return fail(ExitFail, "%v", err)
	}
	fmt.Fprintf(stdio.Out, "wrote %s (mode 0600)\n\n%s", path, s.nextSteps(path))
	return ExitOK
}

// setup gathers the flags, then the environment, then the defaults.
func (o *initOptions) setup() (*setup, error) {
	env := func(name string) string { return strings.TrimSpace(os.Getenv(name)) }
	pick := func(flagValue, flag, envName string) secret {
		if o.given[flag] {
			return secret{value: strings.TrimSpace(flagValue)}
		}
		if v := env(envName); v != "" {
			return secret{value: v, env: envName}
		}
		return secret{}
	}
	s := &setup{
		modelURL:   firstNonEmpty(o.modelURL, env("OPENAI_BASE_URL"), "https://api.openai.com/v1"),
		model:      firstNonEmpty(o.model, env("OPENAI_MODEL")),
		httpListen: o.httpListen,
		apiKey:     pick(o.apiKey, "api-key", "OPENAI_API_KEY"),
	}
	if s.httpListen != "" && !httpapi.IsLoopback(s.httpListen) {
		s.httpToken = pick("", "", "SWITCHBOARD_HTTP_TOKEN")
		if s.httpToken.value == "" {
			s.httpToken = secret{value: newHTTPToken()}
		}
	}
	for _, d := range initChannels() {
		f := o.channels[d.Name]
		if f == nil {
			f = &channelFlags{}
		}
		c := &channelSetup{def: d, api: f.api,
			token: pick(f.token, d.Name+"-token", config.FallbackEnv("channels."+d.Name+"."+d.Init.Token())),
			more:  map[string]secret{}}
		for _, m := range d.Init.More {
			var v string
			if p := f.more[m.Key]; p != nil {
				v = *p
			}
			c.more[m.Key] = pick(v, d.Name+"-"+m.Flag, config.FallbackEnv("channels."+d.Name+"."+m.Key))
		}
		var err error
		if c.users, err = userIDs("--"+d.Name+"-user", f.user, userIDPattern(d.Init)); err != nil {
			return nil, err
		}
		s.channels = append(s.channels, c)
	}
	return s, nil
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v = strings.TrimSpace(v); v != "" {
			return v
		}
	}
	return ""
}

var numericID = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9]{1,20}$`) })

// userIDPattern is what one user id of the platform looks like; nil:
// numeric ids.
func userIDPattern(in *channels.Init) *regexp.Regexp {
	if in.UserID == nil {
		return nil
	}
	return in.UserID()
}

// userIDs splits a list of user ids (separated by commas or spaces), each
// matching pattern (nil: numeric ids).
func userIDs(what, list string, pattern *regexp.Regexp) ([]string, error) {
	ids := strings.FieldsFunc(list, func(r rune) bool { return r == ',' || r == ' ' })
	for _, id := range ids {
		switch {
		case pattern == nil && !numericID().MatchString(id):
			return nil, fmt.Errorf("%s: %q is not a numeric user id", what, id)
		case pattern != nil && !pattern.MatchString(id):
			return nil, fmt.Errorf("%s: %q is not a user id", what, id)
		}
	}
	return ids, nil
}

// config is the setup as a configuration, for the checks.
func (s *setup) config() *config.Config {
	cfg := config.Default()
	cfg.LLM.BaseURL, cfg.LLM.Model, cfg.LLM.APIKey = s.modelURL, s.model, s.apiKey.value
	if s.httpListen != "" {
		cfg.HTTP.Listen = s.httpListen
	}
	cfg.HTTP.Token = s.httpToken.value
	for _, c := range s.channels {
		sec := cfg.Channels.Section(c.def.Name)
		common := sec.Settings()
		common.Enabled, common.AllowUsers, common.Admins = c.token.value != "", c.users, c.users
		channels.SetString(sec, c.def.Init.Token(), c.token.value)
		for _, m := range c.def.Init.More {
			channels.SetString(sec, m.Key, c.more[m.Key].value)
		}
		if c.api != "" {
			channels.SetString(sec, c.def.Init.APIKey, c.api)
		}
		if c.def.Init.Apply != nil {
			c.def.Init.Apply(sec, c.answers())
		}
	}
	return cfg
}

// initCheck is one check init makes before writing: the model server or a
// channel's token, as doctor makes it.
type initCheck struct {
	what string
	run  func(ctx context.Context, s *setup) *Finding // nil: it passed
	// flags name what to change in the doctor's fix.
	flags string
}

func (c initCheck) fix(f *Finding) string {
	return f.Fix + " (here: " + c.flags + ")"
}

func failed(fs ...Finding) *Finding {
	for _, f := range fs {
		if f.Severity == SevFail {
			return &f
		}
	}
	return nil
}

var modelCheck = initCheck{"model server", func(ctx context.Context, s *setup) *Finding {
	return failed(doctorModel(ctx, s.config())...)
}, "--model-url, --api-key, --model"}

// tokenCheck is a chat platform's token check, as doctor makes it (none
// when its definition has no Doctor).
func tokenCheck(d channels.Definition) (initCheck, bool) {
	return initCheck{d.Title + " token", func(ctx context.Context, s *setup) *Finding {
		return failed(doctorChannel(ctx, d, s.config()))
	}, "--" + d.Name + "-token"}, d.Doctor != nil
}

// checks lists what the setup needs checked.
func (s *setup) checks() []initCheck {
	list := []initCheck{modelCheck}
	for _, c := range s.channels {
		if chk, ok := tokenCheck(c.def); ok && c.token.value != "" {
			list = append(list, chk)
		}
	}
	return list
}

// anyChannel reports whether the setup enables a chat platform.
func (s *setup) anyChannel() bool {
	for _, c := range s.channels {
		if c.token.value != "" {
			return true
		}
	}
	return false
}

// quote writes s as a double-quoted YAML string that config.Load reads back
// as s ($ doubled, as Load expands ${VAR}).
func quote(s string) string {
	b, _ := json.Marshal(strings.ReplaceAll(s, "$", "$$")) // JSON strings are YAML double-quoted strings
	return string(b)
}

func (v secret) yaml() string {
	if v.env != "" {
		return `"${` + v.env + `}"`
	}
	return quote(v.value)
}

func quoteList(ids []string) string {
	q := make([]string, len(ids))
	for i, id := range ids {
		q[i] = quote(id)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// yaml is the file init writes: only what differs from the defaults, each
// with a word on what it does.
func (s *setup) yaml() []byte {
	var b strings.Builder
	b.WriteString(`# Switchboard configuration, written by "switchboard init".
# It holds secrets: keep it private (mode 0600). Every other setting, with its
# default: config.example.yaml and docs/configuration.md. "switchboard check"
# validates this file. The database (store.path) defaults to switchboard.db
# in this file's directory.

llm:
`)
	fmt.Fprintf(&b, "  base_url: %s\n  model: %s\n", quote(s.modelURL), quote(s.model))
	if s.apiKey.value != "" || s.apiKey.env != "" {
		fmt.Fprintf(&b, "  api_key: %s\n", s.apiKey.yaml())
	}
	if s.anyChannel() {
		b.WriteString("\nchannels:\n")
		for _, c := range s.channels {
			c.write(&b)
		}
	}
	if s.httpListen != "" || s.httpToken.value != "" {
		b.WriteString("\nhttp:\n")
		if s.httpListen != "" {
			fmt.Fprintf(&b, "  listen: %s\n", quote(s.httpListen))
		}
		if s.httpToken.value != "" {
			fmt.Fprintf(&b, "  # The API's bearer token and the dashboard's login: every route but\n  # /healthz needs it.\n  token: %s\n", s.httpToken.yaml())
		}
	}
	return []byte(b.String())
}

// write adds the channel, if it has a token.
func (c *channelSetup) write(b *strings.Builder) {
	if c.token.value == "" {
		return
	}
	fmt.Fprintf(b, "  %s:\n    enabled: true\n    %s: %s\n", c.def.Name, c.def.Init.Token(), c.token.yaml())
	for _, m := range c.def.Init.More {
		if v := c.more[m.Key]; v.value != "" {
			fmt.Fprintf(b, "    %s: %s\n", m.Key, v.yaml())
		}
	}
	if c.api != "" {
		fmt.Fprintf(b, "    %s: %s\n", c.def.Init.APIKey, quote(c.api))
	}
	fmt.Fprintf(b, "    allow_users: %s # user ids; empty admits nobody\n", quoteList(c.users))
	if len(c.users) > 0 { // the ids init asks for are the operator's own
		fmt.Fprintf(b, "    admins: %s # who sees operator matters (skill errors, channel errors) in /status\n", quoteList(c.users))
	}
	if c.def.Init.Extra != nil {
		b.WriteString(c.def.Init.Extra(c.answers()))
	}
}

// nextSteps says what to do once the file is written.
func (s *setup) nextSteps(path string) string {
	arg := ""
	if filepath.Clean(path) != config.DefaultPath {
		arg = " --config " + path
	}
	prog := programName
	var b strings.Builder
	fmt.Fprintf(&b, "Next:\n  %s check%s   validate it and see what would run\n", prog, arg)
	if !s.anyChannel() {
		fmt.Fprintf(&b, "  %s chat%s    talk to the bot in this terminal\n", prog, arg)
	} else {
		fmt.Fprintf(&b, "  %s serve%s   start the bot\n", prog, arg)
	}
	signIn := "no sign-in on loopback"
	if s.httpToken.value != "" {
		signIn = "sign in with http.token from " + path
		if s.httpToken.env != "" {
			signIn = "sign in with $" + s.httpToken.env
		}
	}
	fmt.Fprintf(&b, "  %s   the dashboard while serve runs (%s)\n", httpapi.DashboardURL(firstNonEmpty(s.httpListen, config.Default().HTTP.Listen)), signIn)
	if !s.anyChannel() {
		return b.String()
	}
	for _, c := range s.channels {
		if c.token.value != "" && c.def.Init.NextSteps != nil {
			// The platforms word their steps for a binary on PATH.
			b.WriteString(strings.ReplaceAll(c.def.Init.NextSteps(c.answers(), arg), "switchboard pairing", prog+" pairing"))
		}
	}
	return b.String()
}

// programName is the binary as the operator ran it, for the commands init
// suggests (see commandName).
var programName = commandName(os.Args[0])

// commandName is how to run the binary started as arg0 again: as typed
// ("./switchboard", "/opt/sb/switchboard"), or its name when the shell
// found it on PATH; "switchboard" when the binary is not named so (a test
// binary).
func commandName(arg0 string) string {
	if !strings.HasPrefix(filepath.Base(arg0), "switchboard") {
		return "switchboard"
	}
	return arg0
}

// newHTTPToken is a random http.token: 32 bytes, 64 hex characters.
func newHTTPToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

// writeConfigFile writes body to path with mode 0600 (through a temporary
// file beside it, renamed when complete), after checking that it loads
// and validates as it will when the gateway reads it.
func writeConfigFile(path string, body []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create the directory for %s: %w", path, err)
	}
	f, err := os.CreateTemp(dir, ".config-*.yaml") // mode 0600
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // after the rename, there is nothing left to remove
	if _, err := f.Write(body); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	cfg, err := config.Load(tmp)
	if err == nil {
		err = cfg.Validate()
	}
	if err != nil {
		return fmt.Errorf("the configuration would not load (a bug in init): %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// errInputEnded: standard input ended before every question had an answer.
var errInputEnded = errors.New("the input ended before every question was answered")

// prompter asks questions on the terminal (or whatever standard input is),
// reading secrets without echo when standard input is a terminal.
type prompter struct {
	in  *bufio.Reader
	out io.Writer
	tty int // standard input's descriptor if it is a terminal, else -1
}

func newPrompter(stdio Stdio) *prompter {
	p := &prompter{in: bufio.NewReader(stdio.In), out: stdio.Out, tty: -1}
	if f, ok := stdio.In.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		p.tty = int(f.Fd())
	}
	return p
}

// read runs a blocking read of standard input until it returns or ctx ends
// (Ctrl-C), which abandons it: the command ends then.
func read(ctx context.Context, fn func() (string, error)) (string, error) {
	type answer struct {
		s   string
		err error
	}
	got := make(chan answer, 1)
	go func() {
		s, err := fn()
		got <- answer{s, err}
	}()
	select {
	case a := <-got:
		return a.s, a.err
	case <-ctx.Done():
		return "", errors.New("interrupted")
	}
}

// line reads one answer, trimmed. An answer from a pipe is not echoed, so
// a newline ends its question instead.
func (p *prompter) line(ctx context.Context) (string, error) {
	s, err := read(ctx, func() (string, error) { return p.in.ReadString('\n') })
	if p.tty < 0 {
		fmt.Fprintln(p.out)
	}
	if errors.Is(err, io.EOF) && s == "" {
		return "", errInputEnded
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return "", err
	}
	return strings.TrimSpace(s), nil
}

// password reads one answer from the terminal without echo, restoring the
// terminal if interrupted.
func (p *prompter) password(ctx context.Context) (string, error) {
	state, err := term.GetState(p.tty)
	if err != nil {
		return "", err
	}
	s, err := read(ctx, func() (string, error) {
		b, err := term.ReadPassword(p.tty)
		return string(b), err
	})
	fmt.Fprintln(p.out)
	if err != nil {
		_ = term.Restore(p.tty, state)
		return "", err
	}
	return strings.TrimSpace(s), nil
}

// ask asks a question; Enter takes def.
func (p *prompter) ask(ctx context.Context, question, def string) (string, error) {
	if def != "" {
		fmt.Fprintf(p.out, "%s [%s]: ", question, def)
	} else {
		fmt.Fprintf(p.out, "%s: ", question)
	}
	a, err := p.line(ctx)
	if a == "" {
		a = def
	}
	return a, err
}

// askSecret asks for a secret without echoing it (on a terminal) and never
// shows it. Enter keeps the current one (typed before, or from the
// environment); with skip, "-" answers none.
func (p *prompter) askSecret(ctx context.Context, question string, cur secret, skip bool) (secret, error) {
	var hint []string
	switch {
	case cur.env != "":
		hint = append(hint, "Enter: "+cur.env+" from the environment")
	case cur.value != "":
		hint = append(hint, "Enter: the one given before")
	case skip:
		hint = append(hint, "Enter to skip")
	default:
		hint = append(hint, "Enter for none")
	}
	if skip && cur.value != "" {
		hint = append(hint, "- to skip")
	}
	fmt.Fprintf(p.out, "%s (%s): ", question, strings.Join(hint, ", "))
	readSecret := p.line
	if p.tty >= 0 {
		readSecret = p.password
	}
	a, err := readSecret(ctx)
	switch {
	case err != nil:
		return secret{}, err
	case a == "-" && skip:
		return secret{}, nil
	case a == "":
		return cur, nil
	}
	return secret{value: a}, nil
}

// askIDs asks for user ids (matching pattern; nil: numeric) until the
// answer is a list of them (or empty).
func (p *prompter) askIDs(ctx context.Context, question string, pattern *regexp.Regexp) ([]string, error) {
	for {
		a, err := p.ask(ctx, question, "")
		if err != nil {
			return nil, err
		}
		ids, err := userIDs("user id", a, pattern)
		if err == nil {
			return ids, nil
		}
		if pattern != nil {
			fmt.Fprintf(p.out, "  %v\n", err)
			continue
		}
		fmt.Fprintf(p.out, "  %v: write the number (digits only)\n", err)
	}
}

// interview asks for what the flags did not give and checks each part as
// it is answered, asking again after a failed check.
func (p *prompter) interview(ctx context.Context, path string, s *setup, o *initOptions) error {
	fmt.Fprintf(p.out, "This writes %s. Enter takes the value in brackets.\n", path)
	check := func(c initCheck) bool {
		if o.noCheck {
			return true
		}
		f := c.run(ctx, s)
		if f == nil {
			fmt.Fprintf(p.out, "  ok: %s\n", c.what)
			return true
		}
		fmt.Fprintf(p.out, "  %s: %s\n  fix: %s\n", c.what, f.Message, f.Fix)
		return false
	}
	for first := true; ; first = false {
		var err error
		if !first || !o.given["model-url"] {
			if s.modelURL, err = p.ask(ctx, "Model server URL (OpenAI-compatible; for Ollama: http://localhost:11434/v1)", s.modelURL); err != nil {
				return err
			}
		}
		if !first || !o.given["api-key"] {
			if s.apiKey, err = p.askSecret(ctx, "API key", s.apiKey, false); err != nil {
				return err
			}
		}
		if err := p.askModel(ctx, s, o, first); err != nil {
			return err
		}
		if check(modelCheck) {
			break
		}
	}
	for _, c := range s.channels {
		q, name := c.def.Init, c.def.Name
		chk, hasCheck := tokenCheck(c.def)
		for first := true; ; first = false {
			if !first || !o.given[name+"-token"] {
				var err error
				if c.token, err = p.askSecret(ctx, q.TokenQuestion, c.token, true); err != nil {
					return err
				}
			}
			if c.token.value != "" {
				for _, m := range q.More {
					if first && o.given[name+"-"+m.Flag] {
						continue
					}
					var err error
					if m.Plain {
						var a string
						a, err = p.ask(ctx, m.Question, c.more[m.Key].value)
						c.more[m.Key] = secret{value: a}
					} else {
						c.more[m.Key], err = p.askSecret(ctx, m.Question, c.more[m.Key], true)
					}
					if err != nil {
						return err
					}
				}
			}
			if c.token.value == "" || !hasCheck || check(chk) {
				break
			}
		}
		if c.token.value != "" && !o.given[name+"-user"] {
			var err error
			if c.users, err = p.askIDs(ctx, q.UserQuestion, userIDPattern(q)); err != nil {
				return err
			}
		}
	}
	if err := p.askHTTPToken(ctx, s); err != nil {
		return err
	}
	if err := s.config().Validate(); err != nil {
		return fmt.Errorf("these answers do not make a valid configuration:\n%w", err)
	}
	return nil
}

// askModel asks for the model until the answer is one the server offers:
// an empty answer lists the server's models, and a model it does not
// offer is asked again with the list (not the URL and key, which work).
// Without the list (--no-check, or a server that does not answer) the
// model check that follows judges the answer.
func (p *prompter) askModel(ctx context.Context, s *setup, o *initOptions, first bool) error {
	var offered []string
	if !o.noCheck {
		offered, _ = serverModels(ctx, s.config())
	}
	isOffered := func() bool { return len(offered) == 0 || slices.Contains(offered, s.model) }
	if first && o.given["model"] && s.model != "" && isOffered() {
		return nil
	}
	for {
		def := s.model
		switch {
		case s.model != "" && !isOffered():
			fmt.Fprintf(p.out, "  the server does not offer %q; it offers: %s\n", s.model, clipList(offered, 20))
			def = ""
		case s.model == "" && len(offered) > 0:
			fmt.Fprintf(p.out, "  the server offers: %s\n", clipList(offered, 20))
		}
		if def == "" && len(offered) == 1 {
			def = offered[0]
		}
		var err error
		if s.model, err = p.ask(ctx, "Model", def); err != nil {
			return err
		}
		if s.model != "" && isOffered() {
			return nil
		}
	}
}

// serverModels asks the model server of cfg for its models.
func serverModels(ctx context.Context, cfg *config.Config) ([]string, error) {
	c, err := llm.New(llm.Config{BaseURL: cfg.LLM.BaseURL, APIKey: cfg.LLM.APIKey, Model: "-", MaxRetries: -1})
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, doctorTimeout)
	defer cancel()
	return c.Models(cctx)
}

// askHTTPToken offers a sign-in token for the dashboard and the chat API
// (beyond loopback there is one already: it is required there).
func (p *prompter) askHTTPToken(ctx context.Context, s *setup) error {
	if s.httpToken.value != "" {
		return nil
	}
	listen := firstNonEmpty(s.httpListen, config.Default().HTTP.Listen)
	a, err := p.ask(ctx, fmt.Sprintf("Protect the dashboard (%s) and the chat API with a sign-in token? y/n", httpapi.DashboardURL(listen)), "y")
	if err != nil {
		return err
	}
	if !strings.HasPrefix(strings.ToLower(a), "y") {
		return nil
	}
	if v := strings.TrimSpace(os.Getenv("SWITCHBOARD_HTTP_TOKEN")); v != "" {
		s.httpToken = secret{value: v, env: "SWITCHBOARD_HTTP_TOKEN"}
	} else {
		s.httpToken = secret{value: newHTTPToken()}
	}
	return nil
}
