package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/switchboard-gateway/switchboard/bench/internal/gateway"
	"github.com/switchboard-gateway/switchboard/channels/discord"
	"github.com/switchboard-gateway/switchboard/channels/email"
	"github.com/switchboard-gateway/switchboard/channels/matrix"
	"github.com/switchboard-gateway/switchboard/channels/slack"
	"github.com/switchboard-gateway/switchboard/channels/telegram"
	"github.com/switchboard-gateway/switchboard/channels/whatsapp"
	"github.com/switchboard-gateway/switchboard/config"
	"github.com/switchboard-gateway/switchboard/internal/dendrite"
	"github.com/switchboard-gateway/switchboard/internal/discordfake"
	"github.com/switchboard-gateway/switchboard/internal/mailservers"
	"github.com/switchboard-gateway/switchboard/internal/slackfake"
	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/internal/testkit/cfgfile"
	"github.com/switchboard-gateway/switchboard/internal/tgfake"
	"github.com/switchboard-gateway/switchboard/internal/wafake"
	"github.com/switchboard-gateway/switchboard/internal/waitfor"
)

const tgToken = "7300000001:AAF-bench-Secret_0123456789abcdef"

var channelNames = []string{"telegram", "discord", "slack", "whatsapp", "email", "matrix"}

// rig is one `switchboard serve` with the channels of a set enabled, each
// against its own fake, and the fake model.
type rig struct {
	tg    *tgfake.Fake
	dc    *discordfake.Fake
	sl    *slackfake.Fake
	wa    *wafake.Fake
	mx    *matrixHS
	model *testkit.FakeLLM
	proc  *gateway.Process
	email bool // against the real mail servers of the environment
}

// startRig writes the configuration of set in dir (the shipped defaults,
// see gateway.Shipped, with the set's channels) and starts bin on it; it
// returns once /readyz answers 200.
func startRig(ctx context.Context, bin, dir string, set []string) (*rig, error) {
	r := &rig{model: testkit.Start("127.0.0.1:0")}
	cfg := gateway.Shipped(1, dir, r.model.URL, tgToken, "")
	if slices.Contains(set, "telegram") {
		r.tg = tgfake.Start(tgToken)
		config.Section[*telegram.Config](cfg).APIEndpoint = r.tg.URL
	} else {
		config.Section[*telegram.Config](cfg).Enabled = false
	}
	if slices.Contains(set, "discord") {
		r.dc = discordfake.Start()
		d := config.Section[*discord.Config](cfg)
		d.Enabled, d.Token, d.APIBase, d.GatewayURL = true, r.dc.Token, r.dc.APIBase(), r.dc.GatewayURL()
		d.AllowUsers = []string{"310000000000000001"}
	}
	if slices.Contains(set, "slack") {
		r.sl = slackfake.Start()
		s := config.Section[*slack.Config](cfg)
		s.Enabled, s.BotToken, s.AppToken, s.APIURL = true, slackfake.BotToken, slackfake.AppToken, r.sl.APIURL()
		s.AllowUsers = []string{"U0ALICE"}
	}
	if slices.Contains(set, "whatsapp") { // its webhook on http.listen
		r.wa = wafake.Start()
		w := config.Section[*whatsapp.Config](cfg)
		w.Enabled, w.PhoneNumberID, w.APIBase = true, wafake.PhoneNumberID, r.wa.APIBase()
		w.AccessToken, w.AppSecret, w.VerifyToken = wafake.AccessToken, wafake.AppSecret, wafake.VerifyToken
		w.AllowUsers = []string{"+15551234567"}
	}
	if slices.Contains(set, "email") { // the real servers, as the e2e tests (.ci/mailservers)
		srv := mailservers.Servers{IMAP: os.Getenv(mailservers.IMAPEnv), SMTP: os.Getenv(mailservers.SMTPEnv), Password: os.Getenv(mailservers.PasswordEnv)}
		if srv.IMAP == "" || srv.SMTP == "" || srv.Password == "" {
			r.closeFakes()
			return nil, fmt.Errorf("email needs the mail servers: start them with .ci/mailservers start DIR and export what it prints")
		}
		bot := srv.NewAccount("bench", "switchboard.test")
		e := config.Section[*email.Config](cfg)
		e.Enabled = true
		e.IMAP = email.Server{Address: srv.IMAP, TLS: email.TLSNone}
		e.SMTP = email.Server{Address: srv.SMTP, TLS: email.TLSNone}
		e.Username, e.Password, e.Address = bot.Address, bot.Password, bot.Address
		e.AllowSenders = []string{"@example.org"}
		r.email = true
	}
	if slices.Contains(set, "matrix") { // a real homeserver; encryption on (a binary built with -tags goolm)
		var err error
		if r.mx, err = startMatrix(ctx); err != nil {
			r.closeFakes()
			return nil, err
		}
		m := config.Section[*matrix.Config](cfg)
		m.Enabled, m.Homeserver, m.UserID = true, r.mx.proxy.URL, r.mx.bot.UserID.String()
		m.AccessToken, m.DeviceID, m.Encryption = r.mx.bot.AccessToken, r.mx.bot.DeviceID.String(), true
		m.AllowUsers = []string{"@alice:" + dendrite.ServerName}
	}
	path := filepath.Join(dir, "config.yaml")
	if err := cfgfile.WriteFile(path, cfg); err != nil {
		r.closeFakes()
		return nil, err
	}
	var err error
	if r.proc, err = gateway.Start(ctx, bin, dir, path); err != nil {
		r.closeFakes()
		return nil, err
	}
	return r, nil
}

// connected waits until each enabled channel is connected and idle:
// Telegram has long-polled twice, Discord's session is identified, Slack's
// Socket Mode connection is open, WhatsApp has looked its phone number up
// (its webhook is served once /readyz answers).
func (r *rig) connected(ctx context.Context) error {
	var errs []error
	if r.tg != nil {
		errs = append(errs, r.tg.WaitCalls(ctx, "getUpdates", 2))
	}
	if r.dc != nil {
		errs = append(errs, r.dc.WaitFor(ctx, func() bool { return r.dc.Identifies() > 0 }))
	}
	if r.sl != nil {
		errs = append(errs, r.sl.WaitConnected(ctx, 1))
	}
	if r.wa != nil {
		errs = append(errs, r.wa.WaitCalls(ctx, "phone_number", 1))
	}
	if r.email { // its IMAP session is open and idle: only its log tells
		errs = append(errs, waitfor.Poll(ctx, 20*time.Millisecond, func() bool {
			return strings.Contains(r.proc.Log(), "email: reading the mailbox")
		}))
	}
	if r.mx != nil { // a long poll with a stored token: past the first sync
		errs = append(errs, waitfor.Poll(ctx, 50*time.Millisecond, func() bool { return r.mx.syncs.Load() >= 1 }))
	}
	return errors.Join(errs...)
}

// stop ends the process with SIGTERM (it must exit cleanly) and the fakes.
func (r *rig) stop() error {
	err := r.proc.Stop()
	r.closeFakes()
	return err
}

// kill ends everything at once, after a failure.
func (r *rig) kill() {
	r.proc.Kill()
	r.closeFakes()
}

func (r *rig) closeFakes() {
	r.model.Close()
	if r.tg != nil {
		r.tg.Close()
	}
	if r.dc != nil {
		r.dc.Close()
	}
	if r.sl != nil {
		r.sl.Close()
	}
	if r.wa != nil {
		r.wa.Close()
	}
	if r.mx != nil {
		r.mx.close()
	}
}

// matrixHS is a dendrite with the bot's account, and a proxy before it
// that counts the bot's /sync calls with a token.
type matrixHS struct {
	hs    *dendrite.Server
	bot   dendrite.Account
	proxy *httptest.Server
	syncs atomic.Int64
}

func startMatrix(ctx context.Context) (*matrixHS, error) {
	bin, err := dendrite.FindOrBuild(ctx)
	if err != nil {
		return nil, err
	}
	hs, err := dendrite.Launch(ctx, bin, dendrite.Options{})
	if err != nil {
		return nil, err
	}
	m := &matrixHS{hs: hs}
	if m.bot, err = hs.RegisterUser(ctx, "bot"); err != nil {
		hs.Close()
		return nil, fmt.Errorf("register the bot: %w", err)
	}
	u, err := url.Parse(hs.URL)
	if err != nil {
		hs.Close()
		return nil, err
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ErrorHandler = func(w http.ResponseWriter, _ *http.Request, _ error) { w.WriteHeader(http.StatusBadGateway) } // a long poll cut at the stop
	m.proxy = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/sync") && r.URL.Query().Get("since") != "" {
			m.syncs.Add(1)
		}
		rp.ServeHTTP(w, r)
	}))
	return m, nil
}

func (m *matrixHS) close() {
	m.proxy.CloseClientConnections()
	m.proxy.Close()
	m.hs.Close()
}
