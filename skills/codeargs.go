package skills

// Programs that run their arguments as code. A command tool is a program
// with templated arguments, never a shell; but some programs are
// interpreters of what they are given: GNU sed runs a shell for its `e`
// command, awk has system() and pipes, find runs -exec, env and xargs run
// a program, git reads -c configuration and aliases. A model-chosen value
// in such a position is a program the model writes. check names those
// tools (CodeArguments); at run time, programs with a safe mode get it
// (safeMode), and the confinement of package sandbox holds for the rest.

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// codeProgram says which arguments of a program are code.
type codeProgram struct {
	// script: the first argument that is not an option (or the one after
	// scriptFlags) is a program text or a script file.
	script bool
	// scriptFlags are the options whose next argument is code (sh -c,
	// perl -e, sed -e, git -c, find -exec).
	scriptFlags []string
	// file: the script argument names a file to run (interpreters,
	// shells), rather than holding the program's text (awk, sed).
	file bool
	// valued are options whose next argument is a plain value (awk -F ,).
	valued []string
	// any: every argument may choose what runs (env, xargs: the program
	// they start; ssh: a remote command).
	any bool
	// safe is the option that switches its code features off, when the
	// program has one (GNU sed and gawk: --sandbox).
	safe string
}

// codePrograms are the programs docs/tools.md names as running their
// arguments as code, by base name.
var codePrograms = func() map[string]codeProgram {
	shell := codeProgram{script: true, file: true, scriptFlags: []string{"-c"}}
	interp := codeProgram{script: true, file: true, scriptFlags: []string{"-c", "-e", "-E", "-r", "--eval", "-m"}, valued: []string{"-W", "-X"}}
	awk := codeProgram{script: true, scriptFlags: []string{"-f", "--file", "-e", "--source"}, valued: []string{"-F", "-v", "--assign", "--field-separator"}}
	m := map[string]codeProgram{
		"sed":     {script: true, scriptFlags: []string{"-e", "--expression", "-f", "--file"}, valued: []string{"-l"}, safe: "--sandbox"},
		"gawk":    {script: true, scriptFlags: awk.scriptFlags, valued: awk.valued, safe: "--sandbox"},
		"find":    {scriptFlags: []string{"-exec", "-execdir", "-ok", "-okdir", "-fprintf", "-fprint", "-fls"}},
		"git":     {script: true, valued: []string{"-C"}, scriptFlags: []string{"-c", "--config-env", "--exec-path", "--upload-pack", "--receive-pack", "--git-dir", "--work-tree"}},
		"env":     {any: true},
		"xargs":   {any: true},
		"ssh":     {any: true},
		"nice":    {any: true},
		"nohup":   {any: true},
		"sudo":    {any: true},
		"timeout": {any: true},
		"tar":     {scriptFlags: []string{"--to-command", "--checkpoint-action", "-I", "--use-compress-program", "--rsh-command"}},
		"rsync":   {scriptFlags: []string{"-e", "--rsh", "--rsync-path"}},
		"make":    {script: true, scriptFlags: []string{"-f", "--file", "-C", "--eval"}},
	}
	for _, n := range []string{"awk", "mawk", "nawk", "busybox"} {
		m[n] = awk
	}
	for _, n := range []string{"sh", "bash", "dash", "zsh", "ksh", "fish", "csh", "tcsh"} {
		m[n] = shell
	}
	for _, n := range []string{"perl", "python", "python2", "python3", "ruby", "node", "nodejs", "deno", "bun", "php", "lua", "tclsh", "Rscript", "osascript", "pwsh"} {
		m[n] = interp
	}
	return m
}()

// codeProgramOf is the entry for argv0 (by base name, python3.12 as
// python3), and whether there is one.
func codeProgramOf(argv0 string) (codeProgram, bool) {
	base := filepath.Base(argv0)
	if p, ok := codePrograms[base]; ok {
		return p, true
	}
	base = strings.TrimRight(base, "0123456789.")
	p, ok := codePrograms[base]
	return p, ok
}

// CodeArguments lists, for a command tool's argv, the arguments where a
// placeholder puts model-chosen text in a code position of a program that
// runs its arguments as code: a sentence each, naming the argument.
func CodeArguments(argv []string) []string {
	if len(argv) == 0 {
		return nil
	}
	p, ok := codeProgramOf(argv[0])
	if !ok {
		return nil
	}
	prog := filepath.Base(argv[0])
	script := p.scriptIndex(argv)
	var out []string
	for i := 1; i < len(argv); i++ {
		a := argv[i]
		if t, err := parseTemplate(a, false); err != nil || !t.hasPlaceholders() {
			continue // a literal (or a broken template, which Build reports)
		}
		prev := argv[i-1]
		switch {
		case p.any:
			out = append(out, fmt.Sprintf("argv[%d] %q: %s runs what its arguments name, so the model chooses the program", i, a, prog))
		case i > 1 && slices.Contains(p.scriptFlags, prev):
			out = append(out, fmt.Sprintf("argv[%d] %q: %s takes the value of %s as code, so the model writes that code", i, a, prog, prev))
		case slices.ContainsFunc(p.scriptFlags, func(f string) bool { return strings.HasPrefix(a, f+"=") }):
			out = append(out, fmt.Sprintf("argv[%d] %q: %s takes this option's value as code, so the model writes that code", i, a, prog))
		case i == script:
			out = append(out, fmt.Sprintf("argv[%d] %q: %s runs this argument as its program (or script file), so the model writes that code", i, a, prog))
		}
	}
	return out
}

// scriptIndex is the index in argv of the argument that is the program
// text or script file (0: none).
func (p codeProgram) scriptIndex(argv []string) int {
	for j := 1; p.script && j < len(argv); j++ {
		a := argv[j]
		switch {
		case slices.Contains(p.scriptFlags, a):
			return 0 // sed -e SCRIPT, awk -f FILE: no positional program
		case slices.Contains(p.valued, a):
			j++ // awk -F , and the like: the next one is a value
		case !strings.HasPrefix(a, "-") || a == "-":
			return j
		}
	}
	return 0
}

// ArgvScripts returns the files of code a command line runs, relative
// paths taken from base (the working directory when empty): argv[0] when
// it is a path, the script an interpreter or shell is given (python3
// scripts/report.py), and the file after -f or --file (awk -f, sed -f).
// They are absolute, with symbolic links resolved where they exist.
// Arguments with placeholders are left out (check reports them).
func ArgvScripts(base string, argv []string) []string {
	if len(argv) == 0 {
		return nil
	}
	base = resolved(base)
	var files []string
	if strings.ContainsRune(argv[0], filepath.Separator) {
		files = append(files, argv[0])
	}
	if p, ok := codeProgramOf(argv[0]); ok {
		if i := p.scriptIndex(argv); i > 0 && p.file {
			files = append(files, argv[i])
		}
		for i := 1; i+1 < len(argv); i++ {
			if argv[i] == "-f" || argv[i] == "--file" {
				files = append(files, argv[i+1])
			}
		}
	}
	var out []string
	for _, f := range files {
		if strings.ContainsAny(f, "{}") || strings.TrimSpace(f) == "" {
			continue
		}
		if !filepath.IsAbs(f) {
			f = filepath.Join(base, f)
		}
		out = append(out, resolved(f))
	}
	return out
}

// safeModes caches, per program path, the option that switches off its
// code features, "" when it has none.
var safeModes sync.Map

// safeMode returns the option to put before a program's other arguments
// that switches off its features that run commands or touch other files
// (GNU sed's and gawk's --sandbox: no e, r, w commands; no system(),
// no redirections), or "" when the program has none or the skill already
// passes it. The program is asked once whether it understands the option.
func safeMode(argv0, program string, argv []string) string {
	p, ok := codeProgramOf(argv0)
	if !ok || p.safe == "" {
		// awk may be gawk under another name.
		if real, err := filepath.EvalSymlinks(program); err == nil {
			p, ok = codeProgramOf(real)
		}
		if !ok || p.safe == "" {
			return ""
		}
	}
	if slices.Contains(argv, p.safe) {
		return ""
	}
	if v, ok := safeModes.Load(program); ok {
		return v.(string)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	mode := ""
	if exec.CommandContext(ctx, program, p.safe, "--version").Run() == nil {
		mode = p.safe
	}
	safeModes.Store(program, mode)
	return mode
}
