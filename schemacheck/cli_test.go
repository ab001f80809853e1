package schemacheck

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestParseHeaders(t *testing.T) {
	env := map[string]string{"TOKEN": "s3cret", "EMPTY": ""}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	got, err := ParseHeaders([]string{"Authorization: Bearer $TOKEN", "X-Team:  ${TOKEN}-1 ", "X-Empty: $EMPTY", "X-Plain: a:b"}, lookup)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"Authorization": "Bearer s3cret", "X-Team": "s3cret-1", "X-Empty": "", "X-Plain": "a:b"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ParseHeaders = %v, want %v", got, want)
	}
	if h, err := ParseHeaders(nil, lookup); h != nil || err != nil {
		t.Fatalf("no flags: %v, %v", h, err)
	}
	for _, tc := range []struct{ flag, want string }{
		{"Authorization Bearer x", `"… (no ':')"`},
		{"Bad Name: v", `"Bad Name: …": want "Name: value"`},
		{": v", `want "Name: value"`},
		{"Authorization: Bearer $MISSING", "$MISSING not set in the environment"},
		{"X: ${MISSING} $ALSO", "$MISSING, $ALSO not set"},
	} {
		_, err := ParseHeaders([]string{tc.flag}, lookup)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err = %v, want %q", tc.flag, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%q: the error shows a value: %v", tc.flag, err)
		}
	}
	// A value that expands to a line break is refused (header injection).
	env["NL"] = "a\r\nX-Injected: 1"
	if _, err := ParseHeaders([]string{"X: $NL"}, lookup); err == nil || !strings.Contains(err.Error(), "line break") || strings.Contains(err.Error(), "Injected") {
		t.Fatalf("line break: %v", err)
	}
}

func TestSplitCommandLine(t *testing.T) {
	for in, want := range map[string][]string{
		`node dist/index.js --read-only`:      {"node", "dist/index.js", "--read-only"},
		`  a   b  `:                           {"a", "b"},
		`a 'b c' "d \"e\"" g\ h`:              {"a", "b c", `d "e"`, "g h"},
		`python -c 'print("hi")'`:             {"python", "-c", `print("hi")`},
		`a 'x'"y"z`:                           {"a", "xyz"},
		`a "" ''`:                             {"a", "", ""},
		`echo $HOME`:                          {"echo", "$HOME"},
		"run --flag=\"with space\" --n=1":     {"run", "--flag=with space", "--n=1"},
		`/opt/My\ Server/bin/srv --port 8080`: {"/opt/My Server/bin/srv", "--port", "8080"},
	} {
		got, err := SplitCommandLine(in)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("SplitCommandLine(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for in, want := range map[string]string{
		``:                    "empty command",
		`   `:                 "empty command",
		`a "unterminated`:     "unterminated quote",
		`a 'unterminated`:     "unterminated quote",
		`a\`:                  "trailing backslash",
		`node srv.js | tee x`: `"|" at offset 12 needs a shell`,
		`a; b`:                `";" at offset 1 needs a shell`,
		`a && b`:              `"&&" at offset 2 needs a shell`,
		`a > out`:             `">" at offset 2 needs a shell`,
		`a & `:                `"&" at offset 2 needs a shell`,
	} {
		if _, err := SplitCommandLine(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("SplitCommandLine(%q): err = %v, want %q", in, err, want)
		}
	}
}

func TestWriteText(t *testing.T) {
	over := `{"type":"object","properties":{"a":{"type":"object","properties":{"x":{"type":"string"}}}},"d":"` + strings.Repeat("x", 300) + `"}`
	tools := []Tool{
		{Name: "big-tool", InputSchema: json.RawMessage(over)},
		{Name: "evil\u202etool\x1b[2J", InputSchema: json.RawMessage(`{"type":"object"}`)},
		{Name: "snake_case", InputSchema: json.RawMessage(`{"type":"object","properties":"x"}`)},
		{Name: "cut", InputSchema: json.RawMessage(`{"type":"object","properties":{"q":"[Object]"}}`), Truncated: true},
	}
	s := Settings{CharLimit: 200, MaxOversized: new(0), InjectContext: new(false)}
	r := Check(tools, s)
	var b bytes.Buffer
	WriteText(&b, "stdio server \x1b]0;title\x07srv", s, r, 1)
	out := b.String()
	for _, want := range []string{
		`Schema check of stdio server \x1b]0;title\asrv: 4 tools, char limit 200, context injection off, name rule posthog (at most 52 characters)`,
		"OVERSIZED TOOLS (serialized size ≥ 200, largest first)",
		"big-tool",
		"LOW NESTED DESCRIPTION COVERAGE",
		"NAME FAILURES",
		`"evil\u202etool\x1b[2J"`,
		"… and 1 more (--limit 0 shows all, --format json gives everything)",
		"STRUCTURAL PROBLEMS",
		"snapshots cut by the SDK ",
		"BROKEN RATCHET",
		"FAILED: 2 ratchets broken (exit status 1).",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("text report lacks %q:\n%s", want, out)
		}
	}
	for _, bad := range []string{"\x1b", "\u202e", "\x07"} {
		if strings.Contains(out, bad) {
			t.Errorf("text report holds the raw control %q", bad)
		}
	}
	b.Reset()
	ok := Check(tools[:1], Settings{MaxOversized: new(1), MinNestedCoverage: new(0.0)})
	WriteText(&b, "f", Settings{}, ok, 0)
	if !strings.Contains(b.String(), "OK: every ratchet holds.") || strings.Contains(b.String(), "OVERSIZED") {
		t.Fatalf("passing report:\n%s", b.String())
	}
}

// TestLimitsSameFromFlagsAndConfig: a value is refused the same way whether it comes from a
// flag or from ratchets.yaml (--char-limit 0 and char_limit: 0 used to differ: the file took
// 0 as the default), only the setting's spelling differs.
func TestLimitsSameFromFlagsAndConfig(t *testing.T) {
	bad := Limits{CharLimit: new(0), MaxOversized: new(-1), MinNestedCoverage: new(1.5), NameRule: new("kebab"),
		NameMaxLen: new(0), MaxTools: new(-1), MaxToolChars: new(-2)}
	flags, yaml := bad.Problems(FlagName, false), bad.Problems(YAMLKey, false)
	if len(flags) != 7 || len(yaml) != 7 {
		t.Fatalf("%d flag problems, %d config problems, want 7 each:\n%q\n%q", len(flags), len(yaml), flags, yaml)
	}
	for i := range flags {
		key := strings.SplitN(yaml[i], " ", 2)[0]
		if want := strings.Replace(yaml[i], key, FlagName(key), 1); flags[i] != want {
			t.Errorf("flag problem %q, config problem %q: they differ beyond the name", flags[i], yaml[i])
		}
	}
	if !strings.HasPrefix(flags[0], "--char-limit is 0: want a positive size") || !strings.HasPrefix(yaml[0], "char_limit is 0: want a positive size") {
		t.Errorf("char limit 0: %q / %q", flags[0], yaml[0])
	}
	good := Limits{CharLimit: new(100), MaxOversized: new(0), MinNestedCoverage: new(0.0), NameRule: new("mcp"),
		NameMaxLen: new(60), MaxTools: new(0), MaxToolChars: new(0), InjectContext: new(false), ContextDescription: new("d")}
	if p := good.Problems(FlagName, false); len(p) != 0 {
		t.Fatalf("good limits: %q", p)
	}
	var s Settings
	ApplyLimits(good, &s)
	if s.CharLimit != 100 || *s.MaxOversized != 0 || *s.MinNestedCoverage != 0 || s.NameRule != NameRuleMCP || s.NameMaxLen != 60 ||
		*s.InjectContext || s.ContextDescription != "d" {
		t.Fatalf("ApplyLimits = %+v", s)
	}
	// The same file value and flag value give the same Settings.
	cfg, err := parseConfig("r.yaml", []byte("servers:\n  - name: a\n    url: http://x/mcp\n    char_limit: 100\n    name_rule: mcp\n    name_max_len: 60\n"))
	if err != nil {
		t.Fatal(err)
	}
	var fromFlags Settings
	ApplyLimits(Limits{CharLimit: new(100), NameRule: new("mcp"), NameMaxLen: new(60)}, &fromFlags)
	fromFlags.ServerName = "a"
	if got := cfg.Servers[0].Settings(); !reflect.DeepEqual(got, fromFlags) {
		t.Fatalf("from the file %+v, from flags %+v", got, fromFlags)
	}
	// Traffic snapshots are served schemas: injection settings do not apply.
	if p := (Limits{InjectContext: new(true), ContextDescription: new("x")}).Problems(FlagName, true); len(p) != 2 ||
		!strings.HasPrefix(p[0], "--no-inject-context does not apply to traffic") {
		t.Fatalf("traffic: %q", p)
	}
}
