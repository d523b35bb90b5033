package config

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/switchboard-gateway/switchboard/channels"
)

// secretName says whether a setting's name or YAML key says it holds a
// secret.
func secretName(f reflect.StructField) bool {
	yamlKey, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	for _, s := range []string{strings.ToLower(f.Name), strings.ToLower(yamlKey)} {
		for _, w := range []string{"token", "secret", "key", "password"} {
			if strings.Contains(s, w) {
				return true
			}
		}
	}
	return false
}

// plantSecrets sets every string (or list of strings) under v whose name
// says it is a secret to a value of its own, and returns key → value. It
// walks structs, pointers, lists and maps: the whole configuration, every
// registered platform's section included.
func plantSecrets(v reflect.Value, key string, out map[string]string) {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		plantSecrets(v.Elem(), key, out)
	case reflect.Interface: // a platform's section
		if !v.IsNil() {
			plantSecrets(v.Elem().Elem(), key, out)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if !f.IsExported() || f.Type == durationType {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			k := joinKey(key, name)
			if name == "" || name == "-" {
				k = key
			}
			fv := v.Field(i)
			if secretName(f) {
				val := fmt.Sprintf("planted-%d-secret-value", len(out)+1)
				switch {
				case f.Type.Kind() == reflect.String:
					fv.SetString(val)
					out[k] = val
					continue
				case f.Type == reflect.TypeFor[[]string]():
					fv.Set(reflect.ValueOf([]string{val}))
					out[k+"[0]"] = val
					continue
				}
			}
			plantSecrets(fv, k, out)
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Struct {
			v.Set(reflect.MakeSlice(v.Type(), 1, 1))
			plantSecrets(v.Index(0), key+"[0]", out)
		}
	case reflect.Map:
		if v.Type() == reflect.TypeFor[map[string]channels.Section]() {
			for _, k := range v.MapKeys() {
				plantSecrets(v.MapIndex(k), joinKey(key, k.String()), out)
			}
			return
		}
		if v.Type().Key().Kind() == reflect.String && v.Type().Elem().Kind() == reflect.Struct {
			e := reflect.New(v.Type().Elem()).Elem()
			plantSecrets(e, key+".NAME", out)
			v.SetMapIndex(reflect.ValueOf("name"), e)
		}
	}
}

// TestEverySecretIsRedacted is the guard of struct tags: a setting whose
// name or key says it holds a token, a secret, a key or a password (in
// package config or in any registered platform's section) must be
// redacted by Redacted (what `check` may print) and listed by Secrets
// (what the log redactor and the skills' variable guard hide). Tag such a
// field `secret:"true"`.
func TestEverySecretIsRedacted(t *testing.T) {
	c := Default()
	planted := map[string]string{}
	plantSecrets(reflect.ValueOf(c).Elem(), "", planted)
	if len(planted) < 6 {
		t.Fatalf("planted %d secrets (%v); the walk misses the known ones (llm.api_key, the bot tokens, http.token...)", len(planted), planted)
	}
	shown, err := yaml.Marshal(c.Redacted())
	if err != nil {
		t.Fatal(err)
	}
	secrets := c.Secrets()
	for _, key := range sortedNames(planted) {
		val := planted[key]
		if strings.Contains(string(shown), val) {
			t.Errorf("%s looks like a secret but Redacted shows it: tag its field `secret:\"true\"`", key)
		}
		if !slices.Contains(secrets, val) {
			t.Errorf("%s looks like a secret but Secrets does not list it (logs would not hide it): tag its field `secret:\"true\"`", key)
		}
	}
	for _, key := range []string{"llm.api_key", "channels.telegram.token", "channels.discord.token", "channels.telegram.webhook.secret_token", "http.token", "tools.web.search.api_key"} {
		if _, ok := planted[key]; !ok {
			t.Errorf("the walk did not find %s", key)
		}
	}
}
