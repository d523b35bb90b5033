// Package skills turns skill files into prompt text and tools. A skill
// bundles instructions, when it applies, the tools it may use and the tools
// it defines. Skills come from YAML files (*.yaml) and from Agent Skills
// folders (<name>/SKILL.md with YAML front matter), plus a few built in; a
// file of the same name overrides a built-in skill.
package skills

import (
	"time"
)

// Activation says when a skill's instructions and tools enter a turn.
type Activation string

const (
	// Always: in every turn where it applies; its instructions are part of
	// the static prompt prefix.
	Always Activation = "always"
	// Auto: listed in the catalogue by name and description; the model loads
	// it with the use_skill tool (the default).
	Auto Activation = "auto"
	// Command: the user types /<command> [args].
	Command Activation = "command"
	// Triggers: a keyword or regular expression matches the user's message.
	Triggers Activation = "triggers"
)

// Skill is one skill as written in a file.
type Skill struct {
	Name         string     `yaml:"name"`
	Description  string     `yaml:"description"`
	Instructions string     `yaml:"instructions"`
	Activation   Activation `yaml:"activation"`
	// Command is the slash command (without /) for Activation command;
	// default: the name.
	Command string `yaml:"command"`
	// Triggers are case-insensitive keywords (whole words) or, written
	// /like this/, regular expressions, matched on the user's message.
	Triggers []string `yaml:"triggers"`
	// Channels and ChatTypes (dm, group) restrict where the skill applies;
	// empty means everywhere.
	Channels  []string `yaml:"channels"`
	ChatTypes []string `yaml:"chat_types"`
	// Tools names existing tools the skill may use while active. When a
	// skill the turn activated (command, trigger, use_skill) lists tools,
	// the step offers only the union of those, the active skills' own
	// tools, send_message and use_skill. An always-on skill's list does not
	// narrow: it is in every turn.
	Tools       []string  `yaml:"tools"`
	DefineTools []ToolDef `yaml:"define_tools"`
	ToolRules   Rules     `yaml:"tool_rules"`
	// MaxSteps caps turns in which the skill is active (0: the default).
	MaxSteps int `yaml:"max_steps"`
	// Mode "plan" makes the skill's command run as a plan (see /plan).
	Mode string `yaml:"mode"`

	// Set by the loader.
	File    string `yaml:"-"` // where it came from ("builtin:<file>" for built-ins)
	Builtin bool   `yaml:"-"`
}

// ToolDef defines a new tool: an HTTP request, a command, or a prompt to the
// model.
type ToolDef struct {
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
	Kind        string `yaml:"kind"` // http, command or prompt
	// Parameters is the JSON Schema of the arguments (an object schema).
	Parameters       map[string]any `yaml:"parameters"`
	ConcurrencySafe  bool           `yaml:"concurrency_safe"`
	RequiresApproval bool           `yaml:"requires_approval"`
	Timeout          time.Duration  `yaml:"timeout"`
	// MaxResponseChars caps the result (http response body, command output).
	MaxResponseChars int `yaml:"max_response_chars"`

	// kind http: {param} placeholders in URL are URL-escaped, in Body
	// JSON-escaped; ${VAR} in header values comes from the environment,
	// only for variables granted to the skill (skills.grants.NAME.env).
	Method  string            `yaml:"method"`
	URL     string            `yaml:"url"`
	Headers map[string]string `yaml:"headers"`
	Body    string            `yaml:"body"`

	// kind command: argv template, each element with {param} placeholders;
	// run without a shell, in the workspace.
	Argv []string `yaml:"argv"`

	// kind prompt: a templated sub-call to the model, without tools.
	Prompt string `yaml:"prompt"`
	System string `yaml:"system"`
}

// Rules are tool rules that hold while the skill is active.
type Rules struct {
	// Terminal tools end the turn when called.
	Terminal []string `yaml:"terminal"`
	// RequiredBeforeExit tools must have been called before the turn may
	// end with a text answer.
	RequiredBeforeExit []string `yaml:"required_before_exit"`
	// MaxCount caps calls per tool in a turn.
	MaxCount map[string]int `yaml:"max_count"`
	// Children: after a call to the key, only these tools are offered.
	Children map[string][]string `yaml:"children"`
}
