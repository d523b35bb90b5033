package e2e

// The container image (Dockerfile, compose.yaml, deploy/container/). No
// container engine can run here (no registry serves base images, and
// podman run fails inside the sandbox), so TestImage checks what holds
// without one: the build stage's own `go build` command, run here, makes a
// binary that runs with what the runtime stage has, and the image's
// entrypoint, user, volume, port and health check agree with its
// configuration, compose.yaml and docs/operations.md. TestImageHealthz
// builds and runs the image where an engine is at hand.

import (
	"bufio"
	"context"
	"debug/elf"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/switchboard-gateway/switchboard/channels/telegram"
	"github.com/switchboard-gateway/switchboard/config"
	"github.com/switchboard-gateway/switchboard/internal/testkit"
)

// runtimeImages are the runtime stages the test knows: what each provides
// to a dynamically linked binary. gcr.io/distroless/base-debian12 is
// Debian 12's libc6 (glibc 2.36, every library of the package), libssl3,
// CA certificates and tzdata, with the user nonroot (65532)
// (github.com/GoogleContainerTools/distroless, base/README.md).
var runtimeImages = map[string]struct {
	debian string   // the Debian release whose glibc it carries
	glibc  string   // that glibc's version
	libs   []string // the shared libraries it has (sonames)
}{
	"gcr.io/distroless/base-debian12:nonroot": {"bookworm", "2.36", []string{
		"linux-vdso.so.1", "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1", "libc.so.6", "libm.so.6",
		"libpthread.so.0", "libdl.so.2", "librt.so.1", "libresolv.so.2", "libanl.so.1", "libutil.so.1",
		"libnss_dns.so.2", "libnss_files.so.2", "libssl.so.3", "libcrypto.so.3"}},
}

// dockerfile is a Dockerfile as its instructions, continuation lines
// joined and comments dropped.
type dockerfile struct {
	args   map[string]string // ARG defaults (global and per stage)
	stages []*stage
}

type stage struct {
	from, name string
	instrs     [][2]string // instruction (upper case), rest of the line
}

func (s *stage) all(instr string) []string {
	var out []string
	for _, in := range s.instrs {
		if in[0] == instr {
			out = append(out, in[1])
		}
	}
	return out
}

func (s *stage) one(t *testing.T, instr string) string {
	t.Helper()
	all := s.all(instr)
	if len(all) != 1 {
		t.Fatalf("stage %q has %d %s instructions, want one: %q", s.name, len(all), instr, all)
	}
	return all[0]
}

func parseDockerfile(t *testing.T, path string) *dockerfile {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	df := &dockerfile{args: map[string]string{}}
	var cur *stage
	var line string
	for raw := range strings.Lines(string(b)) {
		raw = strings.TrimRight(raw, "\r\n")
		if trimmed := strings.TrimSpace(raw); strings.HasPrefix(trimmed, "#") || (trimmed == "" && line == "") {
			continue
		}
		if cont, ok := strings.CutSuffix(raw, "\\"); ok {
			line += cont
			continue
		}
		line += raw
		instr, rest, _ := strings.Cut(strings.TrimSpace(line), " ")
		instr, rest, line = strings.ToUpper(instr), strings.TrimSpace(rest), ""
		switch instr {
		case "FROM":
			from, name, _ := strings.Cut(rest, " AS ")
			cur = &stage{from: df.expand(strings.TrimSpace(from)), name: strings.TrimSpace(name)}
			df.stages = append(df.stages, cur)
			continue
		case "ARG":
			k, v, _ := strings.Cut(rest, "=")
			df.args[k] = v
		case "RUN": // its options (--mount=…) are BuildKit's, not the command's
			for strings.HasPrefix(rest, "--") {
				_, rest, _ = strings.Cut(rest, " ")
				rest = strings.TrimSpace(rest)
			}
		}
		if cur == nil {
			if instr != "ARG" {
				t.Fatalf("%s before the first FROM", instr)
			}
			continue
		}
		cur.instrs = append(cur.instrs, [2]string{instr, rest})
	}
	return df
}

var dockerVar = regexp.MustCompile(`\$\{(\w+)\}`)

func (df *dockerfile) expand(s string) string {
	return dockerVar.ReplaceAllStringFunc(s, func(m string) string { return df.args[m[2:len(m)-1]] })
}

// shellWords splits a simple shell command: words, "double quotes" and
// 'single quotes', nothing else.
func shellWords(t *testing.T, s string) []string {
	t.Helper()
	var words []string
	var w strings.Builder
	in, quote := false, rune(0)
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			w.WriteRune(r)
		case r == '"' || r == '\'':
			quote, in = r, true
		case r == ' ' || r == '\t':
			if in {
				words, in = append(words, w.String()), false
				w.Reset()
			}
		case strings.ContainsRune("|&;<>()`\\", r):
			t.Fatalf("the go build command %q is not a simple command", s)
		default:
			w.WriteRune(r)
			in = true
		}
	}
	if in {
		words = append(words, w.String())
	}
	return words
}

// execForm parses an instruction's JSON exec form (["a", "b"]).
func execForm(t *testing.T, s string) []string {
	t.Helper()
	var v []string
	if err := yaml.Unmarshal([]byte(s), &v); err != nil || !strings.HasPrefix(s, "[") {
		t.Fatalf("%q is not in exec form ([\"...\"]): %v", s, err)
	}
	return v
}

// goBuild is the go build line of a document or a Dockerfile: its
// environment, its flags (-o and the package apart) and where it writes.
type goBuild struct {
	env    []string
	flags  []string
	output string
	pkg    string
}

func parseGoBuild(t *testing.T, words []string) goBuild {
	t.Helper()
	var b goBuild
	for len(words) > 0 && strings.Contains(words[0], "=") {
		b.env, words = append(b.env, words[0]), words[1:]
	}
	if len(words) < 2 || words[0] != "go" || words[1] != "build" {
		t.Fatalf("not a go build command: %q", words)
	}
	for i := 2; i < len(words); i++ {
		switch w := words[i]; {
		case w == "-o" && i+1 < len(words):
			b.output, i = words[i+1], i+1
		case strings.HasPrefix(w, "-"):
			b.flags = append(b.flags, w)
			if w == "-ldflags" && i+1 < len(words) {
				b.flags, i = append(b.flags, words[i+1]), i+1
			}
		default:
			b.pkg = w
		}
	}
	return b
}

func TestImage(t *testing.T) {
	df := parseDockerfile(t, "../Dockerfile")
	if len(df.stages) != 2 {
		t.Fatalf("want a build stage and a runtime stage, got %d stages", len(df.stages))
	}
	build, runtime := df.stages[0], df.stages[1]

	// The build stage: the official Go image, of go.mod's version, on the
	// Debian release whose glibc the runtime stage has.
	gomod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	goVersion := regexp.MustCompile(`(?m)^go (\S+)$`).FindStringSubmatch(string(gomod))[1]
	img, ok := runtimeImages[runtime.from]
	if !ok {
		t.Fatalf("the runtime stage is FROM %q, which runtimeImages does not describe", runtime.from)
	}
	if want := "golang:" + goVersion + "-" + img.debian; build.from != want || build.name != "build" {
		t.Errorf("build stage FROM %q AS %q, want %q AS build (go.mod's Go, the runtime's Debian)", build.from, build.name, want)
	}

	// Its go build command: the flags docs/operations.md installs with,
	// cgo on for SQLite.
	var runs []string
	for _, r := range build.all("RUN") {
		if strings.Contains(r, "go build") {
			runs = append(runs, r)
		}
	}
	if len(runs) != 1 {
		t.Fatalf("the build stage has %d go build commands, want one: %q", len(runs), runs)
	}
	dfBuild := parseGoBuild(t, shellWords(t, runs[0]))
	ops, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	// The Install section's line, whose comment names the -ldflags that set
	// the version: the build context has no .git for Go to read it from.
	docLine := regexp.MustCompile(`(?m)^go build .*$`).FindString(string(ops))
	docCmd, docComment, _ := strings.Cut(docLine, "#")
	docBuild := parseGoBuild(t, shellWords(t, docCmd))
	wantFlags := append(slices.Clone(docBuild.flags), "-ldflags", "-X main.version=${VERSION}")
	if !slices.Equal(dfBuild.flags, wantFlags) || dfBuild.pkg != docBuild.pkg || !slices.Contains(dfBuild.env, "CGO_ENABLED=1") ||
		!strings.Contains(docComment, `-ldflags "-X main.version=`) {
		t.Errorf("the Dockerfile builds with %q %q %q; docs/operations.md with %q %q (%s), and cgo must be on",
			dfBuild.env, dfBuild.flags, dfBuild.pkg, docBuild.flags, docBuild.pkg, docComment)
	}

	// Run it here, as `docker build --build-arg VERSION=image-test` would.
	df.args["VERSION"] = "image-test"
	bin := filepath.Join(t.TempDir(), "switchboard")
	words := shellWords(t, df.expand(runs[0]))
	b := parseGoBuild(t, words)
	var args []string
	for _, w := range words[len(b.env)+1:] {
		if w == b.output {
			w = bin
		}
		args = append(args, w)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), b.env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	if out, err := exec.Command(bin, "version").Output(); err != nil || string(out) != "switchboard image-test\n" {
		t.Errorf("the built binary's version: %q, %v", out, err)
	}

	// What it links: only libraries the runtime image has, and no glibc
	// symbol newer than its glibc.
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	needed, err := f.ImportedLibraries()
	if err != nil {
		t.Fatal(err)
	}
	syms, _ := f.ImportedSymbols()
	f.Close()
	for _, lib := range needed {
		if !slices.Contains(img.libs, lib) {
			t.Errorf("the binary needs %s, which %s lacks", lib, runtime.from)
		}
	}
	for _, s := range syms {
		if v, ok := strings.CutPrefix(s.Version, "GLIBC_"); ok && versionLess(img.glibc, v) {
			t.Errorf("the binary needs %s@GLIBC_%s; %s has glibc %s", s.Name, v, runtime.from, img.glibc)
		}
	}
	if ldd, err := exec.LookPath("ldd"); err == nil {
		out, err := exec.Command(ldd, bin).CombinedOutput()
		if err != nil {
			t.Fatalf("ldd: %v\n%s", err, out)
		}
		t.Logf("ldd %s:\n%s", bin, out)
		for line := range strings.Lines(string(out)) {
			lib := filepath.Base(strings.Fields(line)[0])
			if strings.Contains(line, "not found") || !slices.Contains(img.libs, lib) {
				t.Errorf("ldd: %s (not in %s)", strings.TrimSpace(line), runtime.from)
			}
		}
	}

	// The runtime stage: that binary and the container configuration, in
	// the places the entrypoint and the health check use.
	copies := runtime.all("COPY")
	var binPath, cfgPath string
	for _, c := range copies {
		fields := strings.Fields(c)
		src, dst := fields[len(fields)-2], fields[len(fields)-1]
		switch {
		case slices.Contains(fields, "--from=build") && src == b.output:
			binPath = dst
		case src == "deploy/container/config.yaml":
			cfgPath = dst
		}
	}
	entry := execForm(t, runtime.one(t, "ENTRYPOINT"))
	if want := []string{filepath.Base(binPath), "--config", cfgPath}; binPath != "/usr/local/bin/switchboard" || !slices.Equal(entry, want) {
		t.Errorf("ENTRYPOINT %q, want %q with the binary copied to /usr/local/bin (%q)", entry, want, binPath)
	}
	if cmd := execForm(t, runtime.one(t, "CMD")); !slices.Equal(cmd, []string{"serve"}) {
		t.Errorf("CMD %q, want [serve]", cmd)
	}
	user := runtime.one(t, "USER")
	if uid, _, _ := strings.Cut(user, ":"); uid == "0" || uid == "root" || uid == "" {
		t.Errorf("USER %q: the gateway must not run as root", user)
	}
	volume := runtime.one(t, "VOLUME")
	var volumeOwned bool
	for _, c := range copies {
		if strings.HasSuffix(c, " "+volume) && strings.Contains(c, "--chown="+user+" ") {
			volumeOwned = true
		}
	}
	if !volumeOwned {
		t.Errorf("the volume %s is not made owned by %s (COPY --chown=%s ... %s)", volume, user, user, volume)
	}
	port := runtime.one(t, "EXPOSE")
	hc := runtime.one(t, "HEALTHCHECK")
	hcOpts, hcCmd, ok := strings.Cut(hc, "CMD ")
	health := execForm(t, strings.TrimSpace(hcCmd))
	if want := append(slices.Clone(entry), "healthcheck"); !ok || !slices.Equal(health, want) {
		t.Errorf("HEALTHCHECK %q, want CMD %q", hc, want)
	}

	// The configuration the image carries: the state in the volume, the
	// HTTP server on the exposed port on all addresses, and so a token
	// required: without one the gateway does not start.
	t.Setenv("OPENAI_MODEL", "gpt-image")
	t.Setenv("SWITCHBOARD_HTTP_TOKEN", "")
	cfg, err := config.Load("../deploy/container/config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "http.token") {
		t.Errorf("the image's configuration without SWITCHBOARD_HTTP_TOKEN: %v, want http.token required", err)
	}
	t.Setenv("SWITCHBOARD_HTTP_TOKEN", "image-http-token-0123456789")
	t.Setenv("TELEGRAM_ENABLED", "true")
	t.Setenv("TELEGRAM_BOT_TOKEN", "123:image")
	if cfg, err = config.Load("../deploy/container/config.yaml"); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("the image's configuration: %v", err)
	}
	for what, path := range map[string]string{"store.path": cfg.Store.Path, "skills.dir": cfg.Skills.Dir, "tools.command.workspace": cfg.Tools.Command.Workspace} {
		if !strings.HasPrefix(path, volume+"/") {
			t.Errorf("%s %q is not in the volume %s", what, path, volume)
		}
	}
	if cfg.HTTP.Listen != "0.0.0.0:"+port || cfg.Tools.Command.Enabled || !config.Section[*telegram.Config](cfg).Enabled || cfg.Store.Driver != config.StoreSQLite {
		t.Errorf("the image's configuration: %+v", cfg.Redacted())
	}
	t.Setenv("SWITCHBOARD_STORE_DRIVER", "postgres")
	t.Setenv("SWITCHBOARD_DB_PASSWORD", "image-db-password")
	if cfg, err := config.Load("../deploy/container/config.yaml"); err != nil || cfg.Validate() != nil || cfg.Store.Driver != config.StorePostgres ||
		!strings.Contains(cfg.Store.DSN, "@postgres:5432/") {
		t.Errorf("the image's configuration on compose's PostgreSQL: %v", err)
	}

	// The health check, as the image runs it, against this binary serving
	// that configuration (its paths moved to a temporary directory, and
	// loopback instead of all addresses).
	checkHealthcheck(t, bin, volume, port, health[1:])

	// compose.yaml runs the same: volume, port, health check, time to stop.
	checkCompose(t, volume, port, hcOpts, health, cfg.ShutdownTimeout)

	// docs/operations.md says so.
	section := string(ops)
	if i := strings.Index(section, "### In a container"); i >= 0 {
		section = section[i:]
		if j := strings.Index(section[4:], "\n## "); j >= 0 {
			section = section[:j+4]
		}
	} else {
		t.Fatal(`docs/operations.md has no "### In a container" section`)
	}
	for _, want := range []string{"`" + volume + "`", "port " + port, "(" + strings.Split(user, ":")[0] + ")",
		"`switchboard healthcheck`", "`" + cfgPath + "`", "docker compose up -d", "--profile replicas", "SWITCHBOARD_HTTP_TOKEN"} {
		if !strings.Contains(section, want) {
			t.Errorf("docs/operations.md's container section does not say %q", want)
		}
	}
}

// versionLess compares dotted versions ("2.34" < "2.36").
func versionLess(a, b string) bool {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(as) || i < len(bs); i++ {
		var x, y int
		if i < len(as) {
			x, _ = strconv.Atoi(as[i])
		}
		if i < len(bs) {
			y, _ = strconv.Atoi(bs[i])
		}
		if x != y {
			return x < y
		}
	}
	return false
}

// checkHealthcheck runs bin serve on the image's configuration and then
// bin with the health check's arguments, which must pass; once serve has
// stopped, they must fail.
func checkHealthcheck(t *testing.T, bin, volume, port string, hcArgs []string) {
	t.Helper()
	dir := t.TempDir()
	src, err := os.ReadFile("../deploy/container/config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	body := strings.ReplaceAll(string(src), volume, dir)
	body = strings.Replace(body, "listen: 0.0.0.0:"+port, "listen: "+addr, 1)
	if body == string(src) || !strings.Contains(body, addr) {
		t.Fatal("could not move the image's configuration here")
	}
	cfgPath := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfgPath, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	if i := slices.Index(hcArgs, "--config"); i >= 0 {
		hcArgs = slices.Clone(hcArgs)
		hcArgs[i+1] = cfgPath
	}
	env := append(os.Environ(), "OPENAI_BASE_URL=http://127.0.0.1:1/v1", "OPENAI_MODEL=m", "TELEGRAM_ENABLED=false",
		"SWITCHBOARD_STORE_DRIVER=sqlite", "SWITCHBOARD_HTTP_TOKEN=image-http-token-0123456789")
	serve := exec.Command(bin, "--config", cfgPath, "serve")
	serve.Env = env
	stderr, err := serve.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	listening := make(chan bool, 1)
	var log strings.Builder
	go func() {
		sc := bufio.NewScanner(stderr)
		found := false
		for sc.Scan() {
			fmt.Fprintln(&log, sc.Text())
			if !found && strings.Contains(sc.Text(), `"http listening"`) {
				found = true
				listening <- true
			}
		}
		if !found {
			listening <- false
		}
	}()
	stopped := false
	defer func() {
		if !stopped {
			serve.Process.Kill()
			serve.Wait()
		}
	}()
	select {
	case ok := <-listening:
		if !ok {
			serve.Wait()
			stopped = true
			t.Fatalf("serve on the image's configuration stopped before listening:\n%s", log.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatal("serve on the image's configuration did not listen within 60s")
	}
	probe := func() (int, string) {
		c := exec.Command(bin, hcArgs...)
		c.Env = env
		out, err := c.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), string(out)
		} else if err != nil {
			t.Fatal(err)
		}
		return 0, string(out)
	}
	if code, out := probe(); code != 0 || !strings.Contains(out, "ok: http://"+addr+"/healthz") {
		t.Errorf("the health check while serving: exit %d: %s", code, out)
	}
	serve.Process.Signal(os.Interrupt)
	serve.Wait()
	stopped = true
	if code, out := probe(); code != 1 {
		t.Errorf("the health check once stopped: exit %d, want 1: %s", code, out)
	}
}

// checkCompose checks compose.yaml's gateway against the image.
func checkCompose(t *testing.T, volume, port, hcOpts string, health []string, shutdown time.Duration) {
	t.Helper()
	b, err := os.ReadFile("../compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var compose struct {
		Services map[string]struct {
			Build       struct{ Context string }
			Profiles    []string
			Environment map[string]string
			Ports       []string
			Volumes     []string
			Healthcheck struct {
				Test              []string
				Interval, Timeout string
				StartPeriod       string `yaml:"start_period"`
				Retries           int
			}
			StopGracePeriod string `yaml:"stop_grace_period"`
			Image           string
		}
		Volumes map[string]any
	}
	if err := yaml.Unmarshal(b, &compose); err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	gw, ok := compose.Services["switchboard"]
	if !ok {
		t.Fatalf("compose.yaml has no service switchboard: %v", compose.Services)
	}
	if gw.Build.Context != "." || len(gw.Profiles) != 0 {
		t.Errorf("the gateway service builds %q, profiles %q: want the Dockerfile here, always on", gw.Build.Context, gw.Profiles)
	}
	var vol string
	for _, v := range gw.Volumes {
		if name, path, _ := strings.Cut(v, ":"); path == volume {
			vol = name
		}
	}
	if _, ok := compose.Volumes[vol]; vol == "" || !ok {
		t.Errorf("the gateway's volumes %q do not keep %s in a named volume", gw.Volumes, volume)
	}
	if len(gw.Ports) != 1 || !strings.HasPrefix(gw.Ports[0], "127.0.0.1:") || !strings.HasSuffix(gw.Ports[0], ":"+port) {
		t.Errorf("ports %q: want the image's port %s on the host's loopback only", gw.Ports, port)
	}
	if want := append([]string{"CMD"}, health...); !slices.Equal(gw.Healthcheck.Test, want) {
		t.Errorf("healthcheck %q, want %q", gw.Healthcheck.Test, want)
	}
	for _, opt := range []string{"--interval=" + gw.Healthcheck.Interval, "--timeout=" + gw.Healthcheck.Timeout,
		"--start-period=" + gw.Healthcheck.StartPeriod, "--retries=" + strconv.Itoa(gw.Healthcheck.Retries)} {
		if !strings.Contains(hcOpts, opt+" ") {
			t.Errorf("compose's healthcheck has %s, the Dockerfile's HEALTHCHECK %q", opt, hcOpts)
		}
	}
	if grace, err := time.ParseDuration(gw.StopGracePeriod); err != nil || grace < shutdown+10*time.Second {
		t.Errorf("stop_grace_period %q leaves too little room after shutdown_timeout %s", gw.StopGracePeriod, shutdown)
	}
	if tok := gw.Environment["SWITCHBOARD_HTTP_TOKEN"]; !strings.HasPrefix(tok, "${SWITCHBOARD_HTTP_TOKEN:?") {
		t.Errorf("SWITCHBOARD_HTTP_TOKEN is %q: compose must refuse to start without it", tok)
	}
	pg, ok := compose.Services["postgres"]
	if !ok || !slices.Equal(pg.Profiles, []string{"replicas"}) || !strings.HasPrefix(pg.Image, "postgres:") {
		t.Errorf("compose.yaml's PostgreSQL: %+v, want the image postgres in the profile replicas", pg)
	}
}

// The image built and run by a container engine answers /healthz, and its
// own health check passes. Opt in with SWITCHBOARD_TEST_ENGINE=docker (or
// podman): it builds the image, pulling the base images.
func TestImageHealthz(t *testing.T) {
	engine := os.Getenv("SWITCHBOARD_TEST_ENGINE")
	if engine == "" {
		why := "no container engine can run here"
		for _, e := range []string{"docker", "podman"} {
			if p, err := exec.LookPath(e); err == nil {
				if err := exec.Command(p, "info").Run(); err == nil {
					why = e + " can run here: set SWITCHBOARD_TEST_ENGINE=" + e + " to build and run the image (pulls the base images)"
					break
				}
				why = "no container engine can run here (" + e + " info fails)"
			}
		}
		testkit.SkipFor(t, "container image", why)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	run := func(args ...string) string {
		t.Helper()
		out, err := exec.CommandContext(ctx, engine, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", engine, strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	tag := fmt.Sprintf("switchboard:e2e-%d", os.Getpid())
	run("build", "--build-arg", "VERSION=e2e", "-t", tag, "..")
	t.Cleanup(func() { exec.Command(engine, "rmi", "-f", tag).Run() })
	id := run("run", "-d", "-e", "OPENAI_BASE_URL=http://127.0.0.1:1/v1", "-e", "OPENAI_MODEL=m",
		"-e", "SWITCHBOARD_HTTP_TOKEN=e2e-http-token-0123456789", "-p", "127.0.0.1::8080", tag)
	t.Cleanup(func() { exec.Command(engine, "rm", "-f", id).Run() })
	if v := run("run", "--rm", tag, "version"); v != "switchboard e2e" {
		t.Errorf("version in the image: %q", v)
	}
	hostPort := run("port", id, "8080/tcp")
	hostPort = strings.TrimSpace(strings.Split(hostPort, "\n")[0])
	// Ready once the gateway logs that its HTTP server listens.
	logs := exec.CommandContext(ctx, engine, "logs", "-f", id)
	out, err := logs.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	logs.Stderr = logs.Stdout
	if err := logs.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { logs.Process.Kill(); logs.Wait() }()
	sc := bufio.NewScanner(out)
	for sc.Scan() && !strings.Contains(sc.Text(), `"http listening"`) {
	}
	resp, err := http.Get("http://" + hostPort + "/healthz")
	if err != nil {
		t.Fatalf("the container's /healthz: %v; logs:\n%s", err, run("logs", id))
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("the container's /healthz: %s", resp.Status)
	}
	if out := run("exec", id, "switchboard", "--config", "/etc/switchboard/config.yaml", "healthcheck"); !strings.HasPrefix(out, "ok: ") {
		t.Errorf("the image's health check in the container: %q", out)
	}
}
