package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/switchboard-gateway/switchboard/channels/registry"
)

// Load reads the configuration file at path, expands environment variable
// references in its values, decodes it strictly onto the built-in defaults and
// fills empty settings from the environment. It does not call Validate.
//
// An empty path means DefaultPath. DefaultPath (however it is spelled, such
// as "./config.yaml") may be missing, in which case the result is Default plus
// the environment; any other missing file is an error.
//
// Scalar values may refer to the environment: ${VAR} expands to the value of
// VAR (empty when unset), ${VAR:-text} to text when VAR is unset or empty, and
// $$ to a literal $. A $ followed by anything else is kept as is. Keys are
// never expanded.
//
// Settings that are empty after decoding are taken from the environment
// variable their field's env tag names: llm.base_url from OPENAI_BASE_URL,
// llm.api_key from OPENAI_API_KEY, llm.model from OPENAI_MODEL, a chat
// platform's token from its own (channels.telegram.token from
// TELEGRAM_BOT_TOKEN) and http.token from SWITCHBOARD_HTTP_TOKEN. A value
// in the file wins over the environment, which wins over the built-in default.
//
// A SQLite store.path the file does not set defaults to switchboard.db in the
// file's directory (see storeNextTo), and an unset skills.dir is
// switchboard-skills there (see skillsNextTo).
//
// Problems are reported as *Error values naming the file, line and key; all
// of them are reported at once, joined with errors.Join.
func Load(path string) (*Config, error) {
	if path == "" {
		path = DefaultPath
	}
	data, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) && filepath.Clean(path) == DefaultPath {
			return parse("", nil, os.LookupEnv)
		}
		return nil, readError(path, err)
	}
	cfg, err := parse(path, data, os.LookupEnv)
	if err != nil {
		return nil, err
	}
	cfg.storeNextTo(path)
	cfg.skillsNextTo(path)
	return cfg, nil
}

func readError(path string, err error) error {
	cause := err
	var pe *fs.PathError
	if errors.As(err, &pe) {
		cause = pe.Err // the path is already in Error.File
	}
	msg := "cannot read configuration: " + cause.Error()
	if errors.Is(err, fs.ErrNotExist) {
		msg = "configuration file not found; create it from config.example.yaml, " +
			"or give no path to run on built-in defaults and the environment"
	}
	return &Error{File: path, Msg: msg, err: err}
}

// envFallback is a setting Load takes from the environment when it is
// empty: a field tagged `env:"NAME"`.
type envFallback struct {
	key, env string
	field    *string
}

// envFallbacks lists cfg's settings that fall back to the environment.
func envFallbacks(cfg *Config) []envFallback {
	var out []envFallback
	cfg.eachString(func(f stringField) {
		if env := f.field.Tag.Get("env"); env != "" {
			out = append(out, envFallback{f.key, env, f.p})
		}
	})
	return out
}

// parse is Load without the file system: file names the source in messages
// (empty when there is none) and lookup reads the environment.
func parse(file string, data []byte, lookup func(string) (string, bool)) (*Config, error) {
	cfg := Default()
	// Cleared so that OPENAI_BASE_URL can fill it before the default does.
	cfg.LLM.BaseURL = ""
	src := &source{file: file, lines: map[string]int{}, env: map[string]string{}}

	root, err := parseYAML(file, data)
	if err != nil {
		return nil, err
	}
	if root != nil {
		w := &walker{file: file, lookup: lookup, src: src, expanded: map[*yaml.Node]bool{}, raw: map[*yaml.Node]string{}}
		w.walk(root.Content[0], reflect.TypeFor[Config](), "")
		if err := joinErrors(w.errs); err != nil {
			return nil, err
		}
		if err := decode(root, cfg); err != nil {
			return nil, &Error{File: file, Msg: "configuration passed the checks but not decoding (a bug in package config): " + err.Error(), err: err}
		}
	}

	for _, f := range envFallbacks(cfg) {
		p := f.field
		if *p != "" {
			continue
		}
		if v, ok := lookup(f.env); ok && v != "" {
			*p = v
			src.env[f.key] = f.env
			delete(src.lines, f.key) // the value no longer comes from the file
		}
	}
	if cfg.LLM.BaseURL == "" {
		cfg.LLM.BaseURL = defaultBaseURL
	}
	cfg.src = src
	return cfg, nil
}

// parseYAML parses data into a document node, or returns nil when data holds
// no document or only a null one.
func parseYAML(file string, data []byte) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, syntaxError(file, err)
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return nil, syntaxError(file, err)
	default:
		return nil, &Error{File: file, Line: next.Line, Msg: `a second YAML document ("---") follows the first; keep the whole configuration in one document`}
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || isNull(resolveAlias(doc.Content[0])) {
		return nil, nil
	}
	return &doc, nil
}

var yamlLine = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(?:yaml: )?line (\d+): `) })

// parserProblems are the messages of the YAML parser proper (parserc.go), as
// opposed to its scanner. yaml v3 reports the line of a parser problem
// counting from 0, and of a scanner problem counting from 1, leaving the
// line out when it counts 0.
var parserProblems = map[string]bool{
	"did not find expected ',' or ']'":       true,
	"did not find expected ',' or '}'":       true,
	"did not find expected '-' indicator":    true,
	"did not find expected <document start>": true,
	"did not find expected <stream-start>":   true,
	"did not find expected key":              true,
	"did not find expected node content":     true,
	"found duplicate %TAG directive":         true,
	"found duplicate %YAML directive":        true,
	"found incompatible YAML document":       true,
	"found undefined tag handle":             true,
}

// syntaxError turns a YAML parser error ("yaml: line 3: did not find expected
// key") into an *Error positioned at that line.
func syntaxError(file string, err error) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 0
	if m := yamlLine().FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = msg[len(m[0]):]
	}
	if parserProblems[msg] {
		line++
	}
	return &Error{File: file, Line: line, Msg: "invalid YAML: " + msg, err: err}
}

// decode decodes the checked and expanded document onto cfg. The walker has
// already rejected unknown keys and wrong types with their positions, so this
// must not fail (FuzzLoad checks that it does not). It decodes the node itself
// rather than re-encoding it for a yaml.Decoder with KnownFields(true):
// yaml v3 does not re-encode every node faithfully (an empty value in a flow
// mapping comes back as an empty string, not null), and a lossy round trip
// would turn a valid file into an error.
func decode(doc *yaml.Node, cfg *Config) error {
	return doc.Decode(cfg)
}

var durationType = reflect.TypeFor[time.Duration]()

// walker checks a document against the Config schema before it is decoded,
// so every problem can name its line and key, expanding environment
// references in the scalar values it passes.
type walker struct {
	file     string
	lookup   func(string) (string, bool)
	src      *source
	expanded map[*yaml.Node]bool   // scalar → expansion succeeded; aliases share nodes, so expand each once
	raw      map[*yaml.Node]string // scalar → its text before expansion, if expansion changed it
	errs     []*Error
}

func (w *walker) errorf(line int, key, format string, args ...any) {
	w.errs = append(w.errs, &Error{File: w.file, Line: line, Key: key, Msg: fmt.Sprintf(format, args...)})
}

func (w *walker) walk(n *yaml.Node, t reflect.Type, key string) {
	n = resolveAlias(n)
	if n.Kind == yaml.ScalarNode && !w.expand(n, key) {
		return
	}
	if isNull(n) {
		return // unset: the default stays
	}
	switch {
	case t.Kind() == reflect.Pointer:
		// An optional setting (such as shard_id): null, handled above, leaves
		// it unset; anything else is checked as the type it points to.
		w.walk(n, t.Elem(), key)
	case t == durationType:
		w.duration(n, key)
	case t.Kind() == reflect.Struct:
		w.mapping(n, t, key)
	case t.Kind() == reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			w.errorf(n.Line, key, "%s: expected a list such as [a, b], got %s", key, w.describe(n))
			return
		}
		for i, item := range n.Content {
			itemKey := key + "[" + strconv.Itoa(i) + "]"
			w.src.lines[itemKey] = item.Line
			w.walk(item, t.Elem(), itemKey)
		}
	case t.Kind() == reflect.Map && t.Key().Kind() == reflect.String:
		w.namedMapping(n, t, key)
	case t.Kind() == reflect.String:
		if n.Kind != yaml.ScalarNode {
			w.errorf(n.Line, key, "%s: expected a string, got %s", key, w.describe(n))
			return
		}
		w.decodeScalar(n, t, key, "a string")
	case t.Kind() == reflect.Int:
		switch {
		case n.Kind == yaml.ScalarNode && n.ShortTag() == "!!float":
			w.errorf(n.Line, key, "%s: expected a whole number, got %s", key, w.describe(n))
		case n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int":
			w.errorf(n.Line, key, "%s: expected a number, got %s", key, w.describe(n))
		default:
			w.decodeScalar(n, t, key, "a whole number")
		}
	case t.Kind() == reflect.Float64:
		if n.Kind != yaml.ScalarNode || (n.ShortTag() != "!!float" && n.ShortTag() != "!!int") {
			w.errorf(n.Line, key, "%s: expected a number such as 0.40, got %s", key, w.describe(n))
			return
		}
		w.decodeScalar(n, t, key, "a number")
	case t.Kind() == reflect.Bool:
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" {
			w.errorf(n.Line, key, "%s: expected true or false, got %s", key, w.describe(n))
			return
		}
		w.decodeScalar(n, t, key, "true or false")
	default: // a new field type needs a case above; TestWalkerChecksEverySchemaType catches it
		w.errorf(n.Line, key, "%s: package config cannot check a %s (a bug)", key, t)
	}
}

// decodeScalar decodes n on its own, catching what the tag check cannot
// (an integer too large for int, bad !!binary data).
func (w *walker) decodeScalar(n *yaml.Node, t reflect.Type, key, want string) {
	if err := n.Decode(reflect.New(t).Interface()); err != nil {
		w.errorf(n.Line, key, "%s: expected %s, got %s", key, want, w.describe(n))
	}
}

func (w *walker) duration(n *yaml.Node, key string) {
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str" {
		if _, err := time.ParseDuration(n.Value); err == nil {
			return
		}
	}
	w.errorf(n.Line, key, `%s: expected a duration such as "90s" or "10m", got %s`, key, w.describe(n))
}

func (w *walker) mapping(n *yaml.Node, t reflect.Type, key string) {
	if n.Kind != yaml.MappingNode {
		w.errorf(n.Line, key, "%s: expected a mapping of keys, got %s", keyOrTop(key), w.describe(n))
		return
	}
	names, fields := yamlFields(t)
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolveAlias(n.Content[i]), n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			w.errorf(k.Line, key, "%s: expected a key name, got %s", keyOrTop(key), w.describe(k))
			continue
		}
		name := k.Value
		full := joinKey(key, name)
		if k.ShortTag() == "!!merge" {
			w.errorf(k.Line, key, "%s: merge keys (<<) are not supported; write the keys out", keyOrTop(key))
			continue
		}
		if first, dup := seen[name]; dup {
			w.errorf(k.Line, full, "%s: set twice (first at line %d); keep one", full, first)
			continue
		}
		seen[name] = k.Line
		ft, ok := fields[name]
		if !ok {
			w.errorf(k.Line, full, "%s", unknownKey(key, name, names))
			continue
		}
		w.src.lines[full] = k.Line
		w.walk(v, ft, full)
	}
}

// namedMapping checks a mapping whose keys are names the operator chooses
// (skills.grants: skill names) and whose values are of t's element type.
func (w *walker) namedMapping(n *yaml.Node, t reflect.Type, key string) {
	if n.Kind != yaml.MappingNode {
		w.errorf(n.Line, key, "%s: expected a mapping of names, got %s", keyOrTop(key), w.describe(n))
		return
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolveAlias(n.Content[i]), n.Content[i+1]
		if k.Kind != yaml.ScalarNode || k.ShortTag() == "!!merge" {
			w.errorf(k.Line, key, "%s: expected a name, got %s", keyOrTop(key), w.describe(k))
			continue
		}
		full := joinKey(key, k.Value)
		if first, dup := seen[k.Value]; dup {
			w.errorf(k.Line, full, "%s: set twice (first at line %d); keep one", full, first)
			continue
		}
		seen[k.Value] = k.Line
		w.src.lines[full] = k.Line
		w.walk(v, t.Elem(), full)
	}
}

// expand replaces environment references in a scalar's value, once per node.
// It reports false if the value holds a malformed reference.
func (w *walker) expand(n *yaml.Node, key string) bool {
	if ok, done := w.expanded[n]; done {
		return ok
	}
	v, err := expandEnv(n.Value, w.lookup)
	w.expanded[n] = err == nil
	if err != nil {
		w.errorf(n.Line, key, "%s: %v", keyOrTop(key), err)
		return false
	}
	if v == n.Value {
		return true
	}
	w.raw[n] = n.Value
	n.Value = v
	// A plain scalar's type comes from its text (`${PORT}` is a string,
	// `8080` a number), so resolve it again. Quoted, block and tagged
	// scalars keep their type.
	const fixed = yaml.TaggedStyle | yaml.DoubleQuotedStyle | yaml.SingleQuotedStyle | yaml.LiteralStyle | yaml.FoldedStyle
	if n.Style&fixed == 0 {
		n.Tag = ""
		switch tag := n.ShortTag(); tag {
		case "!!null", "!!bool", "!!int", "!!float", "!!str", "!!timestamp":
			n.Tag = tag
		default: // "<<" would become a merge key
			n.Tag = "!!str"
		}
	}
	return true
}

var envName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`) })

// expandEnv expands ${VAR}, ${VAR:-default} and $$ in s. Like the shell,
// ":-" applies the default when VAR is unset or empty. The default is
// literal text up to the first "}".
func expandEnv(s string, lookup func(string) (string, bool)) (string, error) {
	if !strings.Contains(s, "$") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '{':
			end := strings.IndexByte(s[i+2:], '}')
			if end < 0 {
				return "", errors.New(`"${" is not closed; close it with "}", or write "$$" for a literal "$"`)
			}
			ref := s[i+2 : i+2+end]
			name, def, hasDef := strings.Cut(ref, ":-")
			if !envName().MatchString(name) {
				return "", fmt.Errorf(`%q is not a valid reference: write ${NAME} or ${NAME:-default} with NAME made of letters, digits and "_", or "$$" for a literal "$"`, "${"+ref+"}")
			}
			v, _ := lookup(name)
			if v == "" && hasDef {
				v = def
			}
			b.WriteString(v)
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String(), nil
}

func resolveAlias(n *yaml.Node) *yaml.Node {
	for range 100 { // aliases cannot chain in valid YAML; the bound is for safety
		if n.Kind != yaml.AliasNode || n.Alias == nil {
			return n
		}
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n.Kind == 0 || (n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null")
}

// describe renders a node for a "got …" clause, shortening long values. An
// expanded value is shown as written in the file: the environment may hold a
// secret, and messages must not print one.
func (w *walker) describe(n *yaml.Node) string {
	if raw, ok := w.raw[n]; ok {
		return "the expansion of " + quoteShort(raw)
	}
	return describe(n)
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return quoteShort(n.Value)
	}
	return "nothing"
}

func quoteShort(s string) string {
	if r := []rune(s); len(r) > 40 {
		s = string(r[:40]) + "…"
	}
	return strconv.Quote(s)
}

func joinKey(parent, name string) string {
	if parent == "" {
		return name
	}
	return parent + "." + name
}

func keyOrTop(key string) string {
	if key == "" {
		return "the top level"
	}
	return key
}

// yamlFields returns a struct's YAML keys in declaration order and their
// types. The fields of an inline struct (a section's channels.Common) are
// its own; Channels has the registered platforms' sections after console.
func yamlFields(t reflect.Type) ([]string, map[string]reflect.Type) {
	var names []string
	types := map[string]reflect.Type{}
	for f := range t.Fields() {
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if f.IsExported() && name == "" && opts == "inline" && f.Type.Kind() == reflect.Struct {
			n, ts := yamlFields(f.Type)
			names = append(names, n...)
			maps.Copy(types, ts)
			continue
		}
		if !f.IsExported() || name == "" || name == "-" {
			continue
		}
		names = append(names, name)
		types[name] = f.Type
		if t == channelsType && name == "console" {
			for _, d := range registry.All {
				names = append(names, d.Name)
				types[d.Name] = d.SectionType()
			}
		}
	}
	return names, types
}

// allKeys lists every key path of the schema, in declaration order.
var allKeys = sync.OnceValue(func() []string {
	var keys []string
	var add func(t reflect.Type, prefix string)
	add = func(t reflect.Type, prefix string) {
		names, types := yamlFields(t)
		for _, name := range names {
			key := joinKey(prefix, name)
			keys = append(keys, key)
			if ft := types[name]; ft.Kind() == reflect.Struct && ft != durationType {
				add(ft, key)
			}
		}
	}
	add(reflect.TypeFor[Config](), "")
	return keys
})

// unknownKey explains an unknown key under parent, suggesting the closest
// known sibling, or the same name elsewhere in the schema, or else listing
// what parent accepts.
func unknownKey(parent, name string, siblings []string) string {
	full := joinKey(parent, name)
	if s := Closest(name, siblings); s != "" {
		return fmt.Sprintf("unknown key %q (did you mean %q?)", full, joinKey(parent, s))
	}
	want := normalizeKey(name)
	for _, k := range allKeys() {
		last := k[strings.LastIndexByte(k, '.')+1:]
		if normalizeKey(last) == want && k != full {
			return fmt.Sprintf("unknown key %q (did you mean %q?)", full, k)
		}
	}
	return fmt.Sprintf("unknown key %q; %s takes %s", full, keyOrTop(parent), strings.Join(siblings, ", "))
}

// Closest returns the candidate nearest to name, if it is near enough to be a
// likely typo: at most one edit per three letters, case, "_" and "-" ignored.
func Closest(name string, candidates []string) string {
	n := normalizeKey(name)
	best, bestDist := "", max(1, len([]rune(n))/3)+1
	for _, c := range candidates {
		if d := editDistance(n, normalizeKey(c)); d < bestDist {
			best, bestDist = c, d
		}
	}
	return best
}

func normalizeKey(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '_' || r == '-' {
			return -1
		}
		return r
	}, strings.ToLower(s))
}

// editDistance is the optimal string alignment distance: insertions,
// deletions, substitutions and swaps of neighbours each cost one.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	if len(ra) > 64 || len(rb) > 64 {
		return max(len(ra), len(rb)) // no key is this long; skip the quadratic work
	}
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}
