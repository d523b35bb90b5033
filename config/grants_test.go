package config

import (
	"reflect"
	"strings"
	"testing"
)

func TestSkillGrantsLoad(t *testing.T) {
	cfg := mustLoad(t, `llm: {model: m}
skills:
  grants:
    weather:
      hosts: [api.weather.example, "127.0.0.1:8081"]
      env: [WEATHER_API_KEY]
`, nil)
	want := map[string]SkillGrant{"weather": {Hosts: []string{"api.weather.example", "127.0.0.1:8081"}, Env: []string{"WEATHER_API_KEY"}}}
	if !reflect.DeepEqual(cfg.Skills.Grants, want) {
		t.Fatalf("got %+v, want %+v", cfg.Skills.Grants, want)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
}

// Bad grants are refused with the key and line: an unknown key, a network,
// a URL, a bad port, a variable written as ${VAR}, the gateway's own
// secrets, a name that cannot be a skill's.
func TestSkillGrantsErrors(t *testing.T) {
	_, err := loadString(t, `llm: {model: m}
skills:
  grants:
    weather:
      host: [api.weather.example]
`, nil)
	if err == nil || !strings.Contains(err.Error(), `config.yaml:5: unknown key "skills.grants.weather.host" (did you mean "skills.grants.weather.hosts"?)`) {
		t.Errorf("unknown key: %v", err)
	}
	_, err = loadString(t, "llm: {model: m}\nskills:\n  grants: [weather]\n", nil)
	if err == nil || !strings.Contains(err.Error(), "config.yaml:3: skills.grants: expected a mapping of names, got a list") {
		t.Errorf("a list: %v", err)
	}
	cfg := mustLoad(t, `llm: {model: m}
skills:
  grants:
    weather:
      hosts: [10.0.0.0/8, "https://api.example", "api.example:0", ok.example]
      env: ["${KEY}", OPENAI_API_KEY, TELEGRAM_BOT_TOKEN, SWITCHBOARD_HTTP_TOKEN, GOOD]
    Bad Name:
      env: [X]
`, map[string]string{"KEY": "sk-secret-value"})
	err = cfg.Validate()
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		`config.yaml:5: skills.grants.weather.hosts[0]: "10.0.0.0/8" is a network; grant each host`,
		`skills.grants.weather.hosts[1]: "https://api.example" is a URL, not a host`,
		`skills.grants.weather.hosts[2]: "api.example:0" has a port that is not a number from 1 to 65535`,
		`config.yaml:6: skills.grants.weather.env[0]: is not a variable name`,
		`skills.grants.weather.env[1]: OPENAI_API_KEY holds the gateway's own secret`,
		`skills.grants.weather.env[2]: TELEGRAM_BOT_TOKEN holds the gateway's own secret`,
		`skills.grants.weather.env[3]: SWITCHBOARD_HTTP_TOKEN holds the gateway's own secret`,
		`skills.grants.Bad Name: "Bad Name" is not a skill name`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("errors lack %q:\n%v", want, err)
		}
	}
	for _, bad := range []string{"hosts[3]", "env[4]", "sk-secret-value"} {
		if strings.Contains(err.Error(), bad) {
			t.Errorf("a valid entry is reported: %s\n%v", bad, err)
		}
	}
}
