// Package dendrite runs a real Matrix homeserver for tests: dendrite
// (github.com/matrix-org/dendrite, Apache-2.0; not the AGPL fork at
// element-hq) on 127.0.0.1, on a free port, with its databases in a
// temporary folder, federation off, and registration only through a shared
// secret. Start returns a Server; Register makes an account on it.
//
// The binaries come from $SWITCHBOARD_DENDRITE_BIN (a folder holding
// dendrite and generate-config; .ci/run builds them there once), or else
// from a cache folder keyed by the version, built there with go install
// the first time (a few minutes cold). A machine where neither works skips
// the test through testkit.Missing (under CI=true: fails it).
package dendrite

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/id"
	"maunium.net/go/mautrix/synapseadmin"

	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/internal/waitfor"
)

// Version is the dendrite release the harness builds.
const Version = "v0.13.8"

// Module is dendrite's module path (the Apache-2.0 one).
const Module = "github.com/matrix-org/dendrite"

// EnvBin names the folder of prebuilt binaries.
const EnvBin = "SWITCHBOARD_DENDRITE_BIN"

// ServerName is the homeserver's name: MXIDs are @user:localhost.
const ServerName = "localhost"

// commands are the binaries the harness runs.
var commands = []string{"dendrite", "generate-config"}

// Server is a running dendrite.
type Server struct {
	// URL is the client-server API's base, http://127.0.0.1:PORT.
	URL string
	// Dir holds its configuration, databases and log.
	Dir    string
	secret string
	cmd    *exec.Cmd
	out    *syncBuffer
	done   chan struct{}
}

// Options change the server from its defaults.
type Options struct {
	// RateLimited keeps dendrite's client rate limiting (off by default:
	// the tests send faster than a person).
	RateLimited bool
}

// Account is a registered user.
type Account struct {
	UserID      id.UserID
	Password    string
	AccessToken string
	DeviceID    id.DeviceID
}

// Start runs a dendrite for t, stopped on t.Cleanup.
func Start(t testing.TB) *Server { return StartWith(t, Options{}) }

// StartWith is Start with options.
func StartWith(t testing.TB, o Options) *Server {
	t.Helper()
	bin := Binaries(t)
	s, err := Launch(t.Context(), bin, o)
	if err != nil {
		t.Fatalf("dendrite: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("dendrite's output (tail):\n%s", s.out.tail(4000))
		}
		s.Close()
	})
	return s
}

// Launch runs a dendrite of the binaries in bin, in a new temporary
// folder, until Close. For programs (bench/channelmem); tests use Start.
func Launch(ctx context.Context, bin string, o Options) (*Server, error) {
	dir, err := os.MkdirTemp("", "dendrite-*")
	if err != nil {
		return nil, err
	}
	secret := randomHex(16)
	if err := writeConfig(ctx, bin, dir, secret, o); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	var lastErr error
	for range 3 { // a port taken between the probe and dendrite's bind: try another
		s, err := start(ctx, bin, dir, secret)
		if err == nil {
			return s, nil
		}
		lastErr = err
	}
	_ = os.RemoveAll(dir)
	return nil, lastErr
}

func start(ctx context.Context, bin, dir, secret string) (*Server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	s := &Server{URL: "http://" + addr, Dir: dir, secret: secret, out: &syncBuffer{}, done: make(chan struct{})}
	s.cmd = exec.Command(filepath.Join(bin, "dendrite"), "--config", filepath.Join(dir, "dendrite.yaml"), "--http-bind-address", addr)
	s.cmd.Dir = dir
	s.cmd.Stdout, s.cmd.Stderr = s.out, s.out
	// If the test binary dies, so does its homeserver.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", s.cmd.Path, err)
	}
	go func() { _ = s.cmd.Wait(); close(s.done) }()
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	err = waitfor.Poll(wctx, 50*time.Millisecond, func() bool {
		select {
		case <-s.done:
			return true
		default:
		}
		return s.up(wctx)
	})
	select {
	case <-s.done:
		return nil, fmt.Errorf("dendrite exited at start (%v):\n%s", s.cmd.ProcessState, s.out.tail(4000))
	default:
	}
	if err != nil {
		s.stop()
		return nil, fmt.Errorf("dendrite did not answer /versions on %s: %w\n%s", addr, err, s.out.tail(4000))
	}
	return s, nil
}

// Close stops the server and removes its folder.
func (s *Server) Close() {
	s.stop()
	_ = os.RemoveAll(s.Dir)
}

// up reports whether the client API answers.
func (s *Server) up(ctx context.Context) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/_matrix/client/versions", nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// stop ends the process: SIGTERM, then SIGKILL after 10 s.
func (s *Server) stop() {
	select {
	case <-s.done:
		return
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

// PID is the homeserver's process id (for memory figures).
func (s *Server) PID() int { return s.cmd.Process.Pid }

// Register makes the account @name:localhost with a random password
// through the shared-secret admin API, and returns it logged in on a new
// device.
func (s *Server) Register(t testing.TB, name string) Account {
	t.Helper()
	a, err := s.RegisterUser(t.Context(), name)
	if err != nil {
		t.Fatalf("dendrite: register %s: %v", name, err)
	}
	return a
}

// RegisterUser is Register for programs.
func (s *Server) RegisterUser(ctx context.Context, name string) (Account, error) {
	cli, err := mautrix.NewClient(s.URL, "", "")
	if err != nil {
		return Account{}, err
	}
	admin := synapseadmin.Client{Client: cli}
	pass := randomHex(12)
	resp, err := admin.SharedSecretRegister(ctx, s.secret, synapseadmin.ReqSharedSecretRegister{Username: name, Password: pass})
	if err != nil {
		return Account{}, err
	}
	return Account{UserID: resp.UserID, Password: pass, AccessToken: resp.AccessToken, DeviceID: resp.DeviceID}, nil
}

// Login logs a in again on a new device (a second client of the same
// user), returning the new token and device.
func (s *Server) Login(t testing.TB, a Account) Account {
	t.Helper()
	cli, err := mautrix.NewClient(s.URL, "", "")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := cli.Login(t.Context(), &mautrix.ReqLogin{
		Type:       mautrix.AuthTypePassword,
		Identifier: mautrix.UserIdentifier{Type: mautrix.IdentifierTypeUser, User: a.UserID.String()},
		Password:   a.Password,
	})
	if err != nil {
		t.Fatalf("dendrite: log %s in: %v", a.UserID, err)
	}
	a.AccessToken, a.DeviceID = resp.AccessToken, resp.DeviceID
	return a
}

// Client is a mautrix client of a on s.
func (s *Server) Client(t testing.TB, a Account) *mautrix.Client {
	t.Helper()
	cli, err := mautrix.NewClient(s.URL, a.UserID, a.AccessToken)
	if err != nil {
		t.Fatal(err)
	}
	cli.DeviceID = a.DeviceID
	return cli
}

// Output is what dendrite printed so far (for a failing test's log).
func (s *Server) Output() string { return s.out.tail(1 << 20) }

// writeConfig makes dir's signing key and dendrite.yaml: generate-config's
// CI defaults (no rate limits, cheap bcrypt, in-memory JetStream), then
// federation off, the shared secret, registration closed to anyone
// without it, full-text search off, and warnings only in the log.
func writeConfig(ctx context.Context, bin, dir, secret string, o Options) error {
	out, err := exec.CommandContext(ctx, filepath.Join(bin, "generate-config"), "-ci", "-dir", dir, "-server", ServerName).Output()
	if err != nil {
		return fmt.Errorf("generate-config: %w", err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(out, &cfg); err != nil {
		return fmt.Errorf("generate-config's output: %w", err)
	}
	set := func(path []string, v any) error {
		m := cfg
		for _, k := range path[:len(path)-1] {
			next, ok := m[k].(map[string]any)
			if !ok {
				return fmt.Errorf("generate-config's output has no %v", path)
			}
			m = next
		}
		m[path[len(path)-1]] = v
		return nil
	}
	key := filepath.Join(dir, "matrix_key.pem")
	if err := writeKey(key); err != nil {
		return err
	}
	for _, kv := range []struct {
		path []string
		v    any
	}{
		{[]string{"global", "private_key"}, key},
		{[]string{"global", "disable_federation"}, true},
		{[]string{"client_api", "registration_shared_secret"}, secret},
		{[]string{"client_api", "registration_disabled"}, true},
		{[]string{"client_api", "enable_registration_without_verification"}, false},
		{[]string{"client_api", "rate_limiting", "enabled"}, o.RateLimited},
		{[]string{"sync_api", "search", "enabled"}, false},
		{[]string{"logging"}, []any{map[string]any{"type": "std", "level": "warn"}}},
	} {
		if err := set(kv.path, kv.v); err != nil {
			return err
		}
	}
	data, err := yaml.Marshal(cfg)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "dendrite.yaml"), data, 0o600)
}

// Binaries returns the folder of the dendrite binaries: $SWITCHBOARD_DENDRITE_BIN,
// or the cache folder of this version, built there first if need be.
func Binaries(t testing.TB) string {
	t.Helper()
	dir, err := FindOrBuild(t.Context())
	if err != nil {
		testkit.Missing(t, "%v", err)
	}
	return dir
}

// FindOrBuild is Binaries for programs.
func FindOrBuild(ctx context.Context) (string, error) {
	if dir := os.Getenv(EnvBin); dir != "" {
		if err := present(dir); err != nil {
			return "", fmt.Errorf("%s=%s: %w (build them: see .ci/run)", EnvBin, dir, err)
		}
		return dir, nil
	}
	dir, err := CacheDir()
	if err != nil {
		return "", fmt.Errorf("dendrite: no cache folder: %w; set %s", err, EnvBin)
	}
	if err := present(dir); err == nil {
		return dir, nil
	}
	buildMu.Lock()
	defer buildMu.Unlock()
	if err := Build(ctx, dir); err != nil {
		return "", fmt.Errorf("dendrite %s could not be built (go install %s/cmd/...@%s): %w; build it into a folder and set %s",
			Version, Module, Version, err, EnvBin)
	}
	return dir, nil
}

var buildMu sync.Mutex

// CacheDir is where the binaries of this version are built: the user's
// cache folder, switchboard/dendrite-VERSION/bin.
func CacheDir() (string, error) {
	c, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(c, "switchboard", "dendrite-"+Version, "bin"), nil
}

// Build installs the binaries into dir with go install, unless they are
// there; a file lock keeps two test processes from building at once.
func Build(ctx context.Context, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("lock %s: %w", lock.Name(), err)
	}
	defer func() { _ = syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) }()
	if present(dir) == nil {
		return nil // another process built them meanwhile
	}
	args := []string{"install"}
	for _, c := range commands {
		args = append(args, Module+"/cmd/"+c+"@"+Version)
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Env = append(os.Environ(), "GOBIN="+dir, "GOFLAGS=", "CGO_ENABLED=1")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%w\n%s", err, out.String())
	}
	return present(dir)
}

// present checks that dir holds every binary.
func present(dir string) error {
	var errs []error
	for _, c := range commands {
		st, err := os.Stat(filepath.Join(dir, c))
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("no %s", c))
		case st.Mode()&0o111 == 0:
			errs = append(errs, fmt.Errorf("%s is not executable", c))
		}
	}
	return errors.Join(errs...)
}

// writeKey writes a new ed25519 signing key in dendrite's PEM form (what
// its generate-keys writes: the 32-byte seed, with a Key-ID header).
func writeKey(path string) error {
	seed := make([]byte, ed25519.SeedSize)
	if _, err := rand.Read(seed); err != nil {
		return err
	}
	data := pem.EncodeToMemory(&pem.Block{Type: "MATRIX PRIVATE KEY", Headers: map[string]string{"Key-ID": "ed25519:test"}, Bytes: seed})
	return os.WriteFile(path, data, 0o600)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// syncBuffer is dendrite's output, written by the process's copier and
// read by the test.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) tail(n int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.buf.String()
	if len(s) > n {
		s = s[len(s)-n:]
	}
	return s
}
