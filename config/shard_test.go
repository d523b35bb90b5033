package config

import (
	"reflect"
	"slices"
	"strconv"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/channels/registry"
)

// TestLoadShardID loads channels.discord.shard_id, the schema's one optional
// (*int) setting, through Load and Validate. Before the walker learned
// pointers, any integer here failed with "package config cannot check a *int".
func TestLoadShardID(t *testing.T) {
	one := 1
	zero := 0
	tests := []struct {
		name     string
		lines    []string
		env      map[string]string
		postgres bool
		want     *int
		loadErr  string // Load fails with exactly this
		valErr   string // Load succeeds, Validate fails with exactly this
	}{
		{name: "shard 0 of 2", lines: []string{"  discord:", "    shard_count: 2", "    shard_id: 0"}, want: &zero},
		{name: "shard 1 of 2", lines: []string{"  discord:", "    shard_count: 2", "    shard_id: 1"}, want: &one},
		{name: "flow mapping", lines: []string{"  discord: {shard_count: 2, shard_id: 1}"}, want: &one},
		{name: "from the environment", lines: []string{"  discord:", "    shard_count: 2", "    shard_id: ${SHARD}"},
			env: map[string]string{"SHARD": "1"}, want: &one},
		{name: "null on postgres claims a shard", lines: []string{"  discord:", "    shard_count: 2", "    shard_id: ~"},
			postgres: true, want: nil},
		{name: "shard 0 of one connection", lines: []string{"  discord:", "    shard_id: 0"}, want: &zero},
		{name: "out of range", lines: []string{"  discord:", "    shard_count: 2", "    shard_id: 2"},
			valErr: "config.yaml:6: channels.discord.shard_id: is 2; it must be from 0 to shard_count-1 (1)"},
		{name: "negative", lines: []string{"  discord:", "    shard_count: 2", "    shard_id: -1"},
			valErr: "config.yaml:6: channels.discord.shard_id: is -1; it must be from 0 to shard_count-1 (1)"},
		{name: "set without shard_count", lines: []string{"  discord:", "    shard_id: 1"},
			valErr: "config.yaml:5: channels.discord.shard_id: is 1; it must be from 0 to shard_count-1 (0)"},
		{name: "not a number", lines: []string{"  discord:", "    shard_count: 2", "    shard_id: first"},
			loadErr: `config.yaml:6: channels.discord.shard_id: expected a number, got "first"`},
		{name: "fraction", lines: []string{"  discord:", "    shard_count: 2", "    shard_id: 0.5"},
			loadErr: `config.yaml:6: channels.discord.shard_id: expected a whole number, got "0.5"`},
		{name: "list", lines: []string{"  discord:", "    shard_count: 2", "    shard_id: [0]"},
			loadErr: `config.yaml:6: channels.discord.shard_id: expected a number, got a list`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := "store: {driver: sqlite}"
			if tt.postgres {
				store = "store: {driver: postgres, dsn: 'postgres://u@h/db'}"
			}
			// Three fixed lines, so the table's lines start on line 4.
			content := doc(append([]string{"llm: {model: m}", store, "channels:"}, tt.lines...)...)
			cfg, err := loadString(t, content, tt.env)
			if tt.loadErr != "" {
				if got := messages(t, err); !slices.Equal(got, []string{tt.loadErr}) {
					t.Fatalf("Load: got %q\nwant %q", got, tt.loadErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			verr := cfg.Validate()
			if tt.valErr != "" {
				if got := messages(t, verr); !slices.Equal(got, []string{tt.valErr}) {
					t.Fatalf("Validate: got %q\nwant %q", got, tt.valErr)
				}
				return
			}
			if verr != nil {
				t.Fatalf("Validate: %v", verr)
			}
			if got := discordOf(cfg).ShardID; !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ShardID = %s, want %s", showIntPtr(got), showIntPtr(tt.want))
			}
		})
	}
}

func showIntPtr(p *int) string {
	if p == nil {
		return "nil"
	}
	return strconv.Itoa(*p)
}

// TestWalkerChecksEverySchemaType sets every field of the schema (pointers
// too), writes the result as YAML and loads it back: the walker must accept
// every field type it meets, and the result must be what was written. A new
// field type the walker has no case for fails here rather than in a user's
// file.
func TestWalkerChecksEverySchemaType(t *testing.T) {
	want := &Config{}
	fill(reflect.ValueOf(want).Elem())
	data, err := yaml.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	got, err := parse("all.yaml", data, func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatalf("parse of every field set:\n%s\n%v", data, err)
	}
	assertConfig(t, got, want)
}

// fill sets every exported field under v to a non-zero value.
func fill(v reflect.Value) {
	switch {
	case v.Type() == durationType:
		v.SetInt(int64(90 * time.Second))
	case v.Kind() == reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i))
			}
		}
	case v.Kind() == reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem())
	case v.Kind() == reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(v.Index(0))
	case v.Type() == reflect.TypeFor[map[string]channels.Section]():
		// every registered platform's section, each field set
		v.Set(reflect.MakeMap(v.Type()))
		for _, d := range registry.All {
			s := d.NewConfig()
			fill(reflect.ValueOf(s).Elem())
			v.SetMapIndex(reflect.ValueOf(d.Name), reflect.ValueOf(s))
		}
	case v.Kind() == reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
		e := reflect.New(v.Type().Elem()).Elem()
		fill(e)
		v.SetMapIndex(reflect.ValueOf("s").Convert(v.Type().Key()), e)
	case v.Kind() == reflect.String:
		v.SetString("s")
	case v.Kind() == reflect.Int:
		v.SetInt(1)
	case v.Kind() == reflect.Bool:
		v.SetBool(true)
	case v.Kind() == reflect.Float64:
		v.SetFloat(0.25)
	default:
		panic("fill: no value for " + v.Type().String())
	}
}
