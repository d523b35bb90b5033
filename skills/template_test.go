package skills

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestKindTemplate(t *testing.T) {
	args := map[string]any{"x": "X", "n": json.Number("2.50"), "o": map[string]any{"k": []any{true, nil}}}
	tests := []struct {
		in, want, wantErr string
		withEnv           bool
	}{
		{in: "{{literal}} {x}", want: "{literal} X"},
		{in: "{{{x}}}", want: "{X}"},
		{in: "{n}|{o}|{missing}|", want: `2.50|{"k":[true,null]}||`},
		{in: "cost: $5 ${x}", want: "cost: $5 $X"},
		{in: "Bearer ${TOKEN}", want: "Bearer <TOKEN>", withEnv: true},
		{in: "${{x}}", want: "${x}", withEnv: true},
		{in: "{ x }", wantErr: "unmatched { at offset 0"},
		{in: "{x", wantErr: "unmatched { at offset 0"},
		{in: "x}", wantErr: "unmatched } at offset 1"},
		{in: "{}", wantErr: "unmatched { at offset 0"},
	}
	for _, tc := range tests {
		tp, err := parseTemplate(tc.in, tc.withEnv)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("parseTemplate(%q): got %v, want %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		got, err := tp.expand(func(s segment) (string, error) {
			if s.env != "" {
				return "<" + s.env + ">", nil
			}
			return argText(args[s.param]), nil
		})
		if err != nil || got != tc.want {
			t.Errorf("%q: got %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}
