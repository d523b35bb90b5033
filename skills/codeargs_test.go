package skills

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// CodeArguments names the placeholders a program would run as code, and
// only those. Issue 29, finding 2.
func TestCodeArguments(t *testing.T) {
	tests := []struct {
		argv []string
		want []string // the argv indexes reported, as "argv[N]"
	}{
		{[]string{"sed", "-n", "{range}", "notes.txt"}, []string{"argv[2]"}},
		{[]string{"sed", "-n", "-e", "{script}", "notes.txt"}, []string{"argv[3]"}},
		{[]string{"sed", "-n", "1,5p", "{file}"}, nil},
		{[]string{"sed", "-e", "s/a/b/", "{file}"}, nil},
		{[]string{"awk", "{program}", "data.csv"}, []string{"argv[1]"}},
		{[]string{"awk", "-F", ",", "{program}"}, []string{"argv[3]"}},
		{[]string{"awk", "-F", ",", "{{print $1}}", "{file}"}, nil},
		{[]string{"/usr/bin/gawk", "-f", "{file}"}, []string{"argv[2]"}},
		{[]string{"find", ".", "-name", "{pattern}"}, nil},
		{[]string{"find", ".", "-exec", "{cmd}", ";"}, []string{"argv[3]"}},
		{[]string{"sh", "-c", "{cmd}"}, []string{"argv[2]"}},
		{[]string{"sh", "-c", "echo \"$1\"", "sh", "{text}"}, nil},
		{[]string{"bash", "{script}"}, []string{"argv[1]"}},
		{[]string{"python3", "scripts/report.py", "{month}"}, nil},
		{[]string{"python3", "-c", "{code}"}, []string{"argv[2]"}},
		{[]string{"python3.12", "{script}"}, []string{"argv[1]"}},
		{[]string{"perl", "-e", "{code}"}, []string{"argv[2]"}},
		{[]string{"node", "--eval={code}"}, []string{"argv[1]"}},
		{[]string{"git", "{subcommand}"}, []string{"argv[1]"}},
		{[]string{"git", "-c", "{config}", "status"}, []string{"argv[2]"}},
		{[]string{"git", "log", "--oneline", "{path}"}, nil},
		{[]string{"env", "X=1", "{program}"}, []string{"argv[2]"}},
		{[]string{"xargs", "{cmd}"}, []string{"argv[1]"}},
		{[]string{"grep", "-n", "{pattern}", "notes.txt"}, nil},
		{[]string{"echo", "{{literal}}"}, nil},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.argv, " "), func(t *testing.T) {
			var got []string
			for _, why := range CodeArguments(tc.argv) {
				got = append(got, why[:strings.Index(why, " ")])
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v, want %v (%q)", got, tc.want, CodeArguments(tc.argv))
			}
		})
	}
}

func TestArgvScripts(t *testing.T) {
	ws := t.TempDir()
	tests := []struct {
		argv []string
		want []string // relative to ws
	}{
		{[]string{"python3", "scripts/report.py", "{month}"}, []string{"scripts/report.py"}},
		{[]string{"python3", "-u", "scripts/report.py"}, []string{"scripts/report.py"}},
		{[]string{"./bin/run.sh", "notes.txt"}, []string{"bin/run.sh"}},
		{[]string{"sh", "tools/go.sh"}, []string{"tools/go.sh"}},
		{[]string{"awk", "-f", "prog.awk", "data.csv"}, []string{"prog.awk"}},
		{[]string{"sh", "-c", "echo hi"}, nil},
		{[]string{"cat", "notes.txt"}, nil},
		{[]string{"python3", "{script}"}, nil},
	}
	for _, tc := range tests {
		var want []string
		for _, w := range tc.want {
			want = append(want, filepath.Join(ws, w))
		}
		if got := ArgvScripts(ws, tc.argv); !reflect.DeepEqual(got, want) {
			t.Errorf("ArgvScripts(%q) = %q, want %q", tc.argv, got, want)
		}
	}
}
