package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// The testdata files are go test -fuzz output of config.FuzzLoad: a clean
// run, the shard_id bug found while fuzzing (the output's first lines left
// out), and the same bug's input failing again as a corpus entry.
func TestParse(t *testing.T) {
	load := target{pkg: pkg{ImportPath: "github.com/switchboard-gateway/switchboard/config"}, name: "FuzzLoad"}
	const bug = "fuzz_test.go:41: walker missed a problem: fuzz.yaml:3: channels.discord.shard_id: package config cannot check a *int (a bug)"
	tests := []struct {
		name   string
		out    []byte
		runErr error
		want   result
	}{
		{name: "pass", out: readFile(t, "pass.txt"),
			want: result{elapsed: 5 * time.Second, execs: 19956, newInteresting: 76, corpus: 136}},
		{name: "found", out: readFile(t, "found.txt"), runErr: errors.New("exit status 1"),
			want: result{elapsed: 24 * time.Second, execs: 85504, newInteresting: 46, corpus: 59, failed: true,
				input: "testdata/fuzz/FuzzLoad/95e6f4f39da5cace", message: bug}},
		{name: "corpus entry", out: readFile(t, "seedfail.txt"), runErr: errors.New("exit status 1"),
			want: result{failed: true, input: "testdata/fuzz/FuzzLoad/95e6f4f39da5cace", message: bug}},
		{name: "seed of f.Add", runErr: errors.New("exit status 1"), out: []byte(
			"fuzz: elapsed: 0s, gathering baseline coverage: 0/12 completed\n" +
				"failure while testing seed corpus entry: FuzzLoad/seed#3\n" +
				"--- FAIL: FuzzLoad (0.01s)\n    --- FAIL: FuzzLoad (0.00s)\n        testing.go:1591: panic: boom\n"),
			want: result{failed: true, input: "seed#3", message: "testing.go:1591: panic: boom"}},
		{name: "build error", runErr: errors.New("exit status 1"), out: []byte(
			"# switchboard/config\nconfig/load.go:12:2: undefined: x\nFAIL\tswitchboard/config [build failed]\n"),
			want: result{failed: true, message: "config/load.go:12:2: undefined: x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := parse(load, tt.out, tt.runErr)
			tt.want.target = load
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestTableNamesTheFailingInput(t *testing.T) {
	load := target{pkg: pkg{ImportPath: "github.com/switchboard-gateway/switchboard/config"}, name: "FuzzLoad"}
	r := parse(load, readFile(t, "found.txt"), errors.New("exit status 1"))
	r.input = "config/" + r.input
	var b bytes.Buffer
	printTable(&b, []result{parse(load, readFile(t, "pass.txt"), nil), r}, "20s", 0, time.Now(), 2)
	for _, want := range []string{
		"| github.com/switchboard-gateway/switchboard/config | FuzzLoad | 19956 | 3991 | 76 | 136 | ok |",
		"| github.com/switchboard-gateway/switchboard/config | FuzzLoad | 85504 | 3562 | 46 | 59 | FAIL: input config/testdata/fuzz/FuzzLoad/95e6f4f39da5cace: fuzz_test.go:41: walker missed",
		"2 of 2 targets run, 1 failed",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}

// findTargets asks go itself: the fuzz targets of config and
// channels/telegram, and none of store, which has no fuzz target.
func TestFindTargets(t *testing.T) {
	got, err := findTargets(context.Background(), []string{"github.com/switchboard-gateway/switchboard/config", "github.com/switchboard-gateway/switchboard/channels/telegram", "github.com/switchboard-gateway/switchboard/store"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tg := range got {
		names = append(names, tg.pkg.ImportPath+"."+tg.name)
		if !filepath.IsAbs(tg.pkg.Dir) {
			t.Errorf("%s: package dir %q is not absolute", tg.name, tg.pkg.Dir)
		}
	}
	want := []string{
		"github.com/switchboard-gateway/switchboard/config.FuzzLoad",
		"github.com/switchboard-gateway/switchboard/channels/telegram.FuzzNormalize",
		"github.com/switchboard-gateway/switchboard/channels/telegram.FuzzRender",
		"github.com/switchboard-gateway/switchboard/channels/telegram.FuzzSplit",
	}
	slices.Sort(names)
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Errorf("got %q\nwant %q", names, want)
	}
}

func readFile(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}
