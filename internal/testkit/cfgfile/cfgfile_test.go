package cfgfile

import (
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/switchboard-gateway/switchboard/channels/discord"
	"github.com/switchboard-gateway/switchboard/channels/telegram"
	"github.com/switchboard-gateway/switchboard/config"
)

// noEnv clears the environment Load falls back on.
func noEnv(t *testing.T) {
	for _, k := range []string{"OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_MODEL", "TELEGRAM_BOT_TOKEN", "DISCORD_BOT_TOKEN"} {
		t.Setenv(k, "")
	}
}

// fill sets every field under v to a value that differs from the default.
func fill(v reflect.Value, name string, n *int) {
	*n++
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			if f := v.Type().Field(i); f.IsExported() {
				fill(v.Field(i), name+"."+f.Name, n)
			}
		}
	case reflect.String:
		// $ and ${...} are kept as written; a quote, a colon and a number
		// need quoting.
		v.SetString(fmt.Sprintf("%s $HOME ${X} $$: '\"%d", strings.ToLower(name), *n))
	case reflect.Bool:
		v.SetBool(!v.Bool())
	case reflect.Int:
		v.SetInt(int64(1000 + *n))
	case reflect.Int64: // time.Duration
		v.SetInt(int64(time.Duration(*n)*time.Second + 250*time.Millisecond))
	case reflect.Float64: // llm.temperature, prices
		v.SetFloat(float64(*n) + 0.25)
	case reflect.Pointer: // channels.discord.shard_id
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem(), name, n)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 2, 2)
		for i := range 2 {
			fill(s.Index(i), fmt.Sprint(name, i), n)
		}
		v.Set(s)
	case reflect.Map:
		if v.Type().Elem().Kind() == reflect.Interface { // channels' sections: fill each in place
			keys := v.MapKeys()
			slices.SortFunc(keys, func(a, b reflect.Value) int { return strings.Compare(a.String(), b.String()) })
			for _, k := range keys {
				fill(v.MapIndex(k).Elem().Elem(), name+"."+k.String(), n)
			}
			return
		}
		// skills.grants
		m := reflect.MakeMap(v.Type())
		k := reflect.New(v.Type().Key()).Elem()
		fill(k, name+"key", n)
		e := reflect.New(v.Type().Elem()).Elem()
		fill(e, name+"value", n)
		m.SetMapIndex(k, e)
		v.Set(m)
	default:
		panic("cfgfile test: fill " + v.Kind().String())
	}
}

func roundTrip(t *testing.T, want *config.Config) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := WriteFile(path, want); err != nil {
		t.Fatal(err)
	}
	got, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	// A file that leaves store.path to its default keeps the database
	// beside itself (config's lookup rules), not in the working directory.
	exp := *want
	if def := config.Default().Store; exp.Store.Driver == def.Driver && exp.Store.Path == def.Path {
		exp.Store.Path = filepath.Join(filepath.Dir(path), def.Path)
	}
	// So does skills.dir (no legacy ./skills folder in the test's directory).
	if def := config.Default().Skills.Dir; exp.Skills.Dir == def {
		exp.Skills.Dir = filepath.Join(filepath.Dir(path), def)
	}
	g, _ := yaml.Marshal(got)
	w, _ := yaml.Marshal(&exp)
	if string(g) != string(w) {
		data, _ := Marshal(want)
		t.Errorf("loaded back:\n%s\nwant:\n%s\nfile:\n%s", g, w, data)
	}
}

// Every field set to something else than its default, strings with $,
// quotes and numbers in them, loads back to the same value.
func TestEveryFieldRoundTrips(t *testing.T) {
	noEnv(t)
	cfg := config.Default()
	n := 0
	fill(reflect.ValueOf(cfg).Elem(), "cfg", &n)
	roundTrip(t, cfg)
}

// Values that are "less" than the defaults (empty, false, zero, empty
// lists), and the defaults themselves, round-trip too; the defaults make
// an empty file.
func TestEmptyValuesRoundTrip(t *testing.T) {
	noEnv(t)
	def := config.Default()
	roundTrip(t, def)
	if data, err := Marshal(def); err != nil || len(data) != 0 {
		t.Errorf("the defaults: %q, %v; want an empty file", data, err)
	}
	cfg := config.Default()
	cfg.HTTP.Listen = ""
	cfg.Learning.Enabled = false
	cfg.Tools.Web.Enabled = false
	cfg.Tools.Web.MaxRedirects = 0
	cfg.Agent.Name = ""
	config.Section[*telegram.Config](cfg).AllowUsers = nil
	roundTrip(t, cfg)
}

// channels.discord.shard_id is a *int: 0 is a shard like any other and is
// written, nil (the default) is left out.
func TestShardIDRoundTrips(t *testing.T) {
	noEnv(t)
	for _, id := range []int{0, 1} {
		cfg := config.Default()
		config.Section[*discord.Config](cfg).ShardCount = 2
		config.Section[*discord.Config](cfg).ShardID = &id
		data, err := Marshal(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("shard_id: %d\n", id); !strings.Contains(string(data), want) {
			t.Errorf("shard %d: file\n%s\nwant it to hold %q", id, data, want)
		}
		roundTrip(t, cfg)
	}
	cfg := config.Default()
	config.Section[*discord.Config](cfg).ShardCount = 2
	if data, _ := Marshal(cfg); strings.Contains(string(data), "shard_id") {
		t.Errorf("ShardID nil: file\n%s\nwant no shard_id", data)
	}
	roundTrip(t, cfg)
}

// The file holds only what differs from the defaults, as a hand-written
// one would.
func TestOnlyChangedKeys(t *testing.T) {
	cfg := config.Default()
	cfg.LLM.Model = "fake-model"
	cfg.Learning.Enabled = false
	config.Section[*telegram.Config](cfg).Enabled = true
	config.Section[*telegram.Config](cfg).PollTimeout = time.Second
	config.Section[*telegram.Config](cfg).AllowUsers = []string{"42"}
	data, err := Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := `llm:
  model: fake-model
channels:
  telegram:
    enabled: true
    allow_users: ["42"]
    poll_timeout: 1s
learning:
  enabled: false
`
	if string(data) != want {
		t.Errorf("got:\n%s\nwant:\n%s", data, want)
	}
}
