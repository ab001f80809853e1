package schemacheck

import (
	"encoding/json"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
)

func TestNameRule(t *testing.T) {
	for _, tc := range []struct {
		name   string
		maxLen int
		ok     bool
		why    string
	}{
		{"feature-flags-list", 52, true, ""},
		{"a", 52, true, ""},
		{"0", 52, true, ""},
		{"query-2", 52, true, ""},
		{strings.Repeat("a", 52), 52, true, ""},
		{strings.Repeat("a", 53), 52, false, "53 characters, over the limit of 52"},
		{strings.Repeat("a", 53), 60, true, ""},
		{"get_me", 52, false, `'_'`},
		{"Get-me", 52, false, `'G'`},
		{"a.b", 52, false, `'.'`},
		{"caf\u00e9", 52, false, `'é'`},
		{"-a", 52, false, "starts or ends with '-'"},
		{"a-", 52, false, "starts or ends with '-'"},
		{"-", 52, false, "starts or ends with '-'"},
		{"", 52, false, "is empty"},
		{"a b", 52, false, `' '`},
		{strings.Repeat("b", 60) + "_", 52, false, "61 characters, over the limit of 52 and contains '_'"},
	} {
		nc := checkName(tc.name, "posthog", tc.maxLen)
		if nc.ok != tc.ok || !strings.Contains(nc.failure, tc.why) || (tc.ok && nc.failure != "") {
			t.Errorf("checkName(%q, max %d) = ok %v %q; want ok %v containing %q", tc.name, tc.maxLen, nc.ok, nc.failure, tc.ok, tc.why)
		}
	}
}

// TestNameLengthInCharacters: lengths are characters (runes), not bytes.
func TestNameLengthInCharacters(t *testing.T) {
	name := strings.Repeat("é", 52) // 104 bytes
	nc := checkName(name, "s", 52)
	if strings.Contains(nc.failure, "over the limit") {
		t.Fatalf("52 characters counted as over 52: %s", nc.failure)
	}
	// Claude Code: mcp__s__ + 52 = 60 characters, no warning although 112 bytes.
	for _, w := range nc.warnings {
		if strings.HasPrefix(w, "Claude Code") || strings.HasPrefix(w, "Cursor") {
			t.Fatalf("length warning for %d characters: %s", 52, w)
		}
	}
}

func TestNameClientWarnings(t *testing.T) {
	has := func(ws []string, client string) bool {
		for _, w := range ws {
			if strings.HasPrefix(w, client+":") {
				return true
			}
		}
		return false
	}
	for _, tc := range []struct {
		server, name string
		claude       bool
		cursor       bool
		openai       bool
		spec         bool
	}{
		// Claude Code: len("mcp__posthog__") = 14, so 50 characters fit in 64 and 51 do not.
		{"posthog", strings.Repeat("a", 50), false, false, false, false},
		{"posthog", strings.Repeat("a", 51), true, false, false, false},
		// Cursor: 7 + 53 = 60 fits, 7 + 54 = 61 does not (Claude Code also warns: 14 + 53 > 64).
		{"posthog", strings.Repeat("a", 53), true, false, false, false},
		{"posthog", strings.Repeat("a", 54), true, true, false, false},
		// A long server name makes Cursor and Claude Code warn about a short tool.
		{strings.Repeat("s", 58), "abc", true, true, false, false},
		{strings.Repeat("s", 57), "abc", true, false, false, false},
		// Empty server name: the shortest prefix, mcp____ (7).
		{"", strings.Repeat("a", 57), false, false, false, false},
		{"", strings.Repeat("a", 58), true, false, false, false},
		// OpenAI: ^[a-zA-Z0-9_-]{1,64}$
		{"p", "Get_Me-2", false, false, false, false},
		{"p", "a.b", false, false, true, false},
		{"p", strings.Repeat("A", 64), true, true, false, false},
		{"p", strings.Repeat("A", 65), true, true, true, false},
		{"p", "", false, false, true, true},
		// MCP spec: ^[A-Za-z0-9_.-]{1,128}$
		{"p", "a b", false, false, true, true},
		{"p", "caf\u00e9", false, false, true, true},
		{"p", strings.Repeat("a", 128), true, true, true, false},
		{"p", strings.Repeat("a", 129), true, true, true, true},
		{"p", "a/b", false, false, true, true},
	} {
		nc := checkName(tc.name, tc.server, 52)
		got := [4]bool{has(nc.warnings, "Claude Code"), has(nc.warnings, "Cursor"), has(nc.warnings, "OpenAI"), has(nc.warnings, "MCP spec")}
		want := [4]bool{tc.claude, tc.cursor, tc.openai, tc.spec}
		if got != want {
			t.Errorf("server %q name %q (%d): warnings %v, want [claude cursor openai spec] = %v\n%s", tc.server, tc.name, len(tc.name), got, want, strings.Join(nc.warnings, "\n"))
		}
	}
}

// TestNameWarningsSayClientAndRule: each warning names the client and its rule.
func TestNameWarningsSayClientAndRule(t *testing.T) {
	nc := checkName(strings.Repeat("x", 129)+" ", "server", 52)
	if len(nc.warnings) != 4 {
		t.Fatalf("want 4 warnings, got %q", nc.warnings)
	}
	for i, want := range [][2]string{
		{"Claude Code:", "64"},
		{"Cursor:", "60"},
		{"OpenAI:", "^[a-zA-Z0-9_-]{1,64}$"},
		{"MCP spec:", "^[A-Za-z0-9_.-]{1,128}$"},
	} {
		if !strings.HasPrefix(nc.warnings[i], want[0]) || !strings.Contains(nc.warnings[i], want[1]) {
			t.Errorf("warning %d = %q, want %s ... %s", i, nc.warnings[i], want[0], want[1])
		}
	}
	if nc.ok || !strings.Contains(nc.failure, "^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?$") {
		t.Errorf("failure should cite the rule: %q", nc.failure)
	}
}

// TestNameMatchersAgreeWithRegexps compares the hand-written matchers with the regular
// expressions of the Definitions on random names.
func TestNameMatchersAgreeWithRegexps(t *testing.T) {
	kebab := regexp.MustCompile(`^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?$`)
	openai := regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
	spec := regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)
	alphabet := []string{"a", "z", "0", "9", "-", "_", ".", "A", "Z", " ", "é", "\x00", "/"}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 20000; i++ {
		var b strings.Builder
		n := rng.IntN(140)
		if rng.IntN(2) == 0 {
			n = rng.IntN(6)
		}
		for j := 0; j < n; j++ {
			if rng.IntN(4) == 0 {
				b.WriteString(alphabet[rng.IntN(len(alphabet))])
			} else {
				b.WriteString(alphabet[rng.IntN(4)])
			}
		}
		name := b.String()
		if matchKebab(name) != kebab.MatchString(name) {
			t.Fatalf("kebab %q: %v vs regexp %v", name, matchKebab(name), kebab.MatchString(name))
		}
		nc := checkName(name, "p", 1000)
		if nc.ok != kebab.MatchString(name) {
			t.Fatalf("NameOK %q = %v", name, nc.ok)
		}
		gotOpenAI, gotSpec := false, false
		for _, w := range nc.warnings {
			gotOpenAI = gotOpenAI || strings.HasPrefix(w, "OpenAI:")
			gotSpec = gotSpec || strings.HasPrefix(w, "MCP spec:")
		}
		if gotOpenAI == openai.MatchString(name) || gotSpec == spec.MatchString(name) {
			t.Fatalf("%q: openai warn %v (regexp match %v), spec warn %v (match %v)", name, gotOpenAI, openai.MatchString(name), gotSpec, spec.MatchString(name))
		}
	}
}

// TestNamesInReport: NameOK, NameFailure, NameWarnings and name_failures in Check, with
// name_max_len applied.
func TestNamesInReport(t *testing.T) {
	s := json.RawMessage(`{"type":"object"}`)
	r := Check([]Tool{{Name: "insight-get", InputSchema: s}, {Name: "get_me", InputSchema: s}, {Name: strings.Repeat("a", 40), InputSchema: s}},
		Settings{ServerName: "posthog", NameMaxLen: 30})
	if r.NameFailures != 2 || !r.PerTool[0].NameOK || r.PerTool[1].NameOK || r.PerTool[2].NameOK {
		t.Fatalf("name failures %d: %+v", r.NameFailures, r.PerTool)
	}
	if !strings.Contains(r.PerTool[2].NameFailure, "over the limit of 30") {
		t.Fatalf("name_max_len not applied: %q", r.PerTool[2].NameFailure)
	}
	if !r.OK() {
		t.Fatalf("name failures are not ratchet violations: %q", r.Violations)
	}
	found := false
	for _, n := range r.Notes {
		found = found || strings.Contains(n, "2 tool names break the naming rule")
	}
	if !found {
		t.Fatalf("no note on name failures: %q", r.Notes)
	}
}

// TestNameRuleMCP: the MCP specification's rule (2025-11-25, server/tools, "Tool Names"):
// 1 to 128 characters of A-Z a-z 0-9 _ - . ; snake_case, camelCase and dotted names pass.
func TestNameRuleMCP(t *testing.T) {
	for _, tc := range []struct {
		name   string
		maxLen int
		ok     bool
		why    string
	}{
		{"get_me", 128, true, ""},
		{"getUser", 128, true, ""},
		{"admin.tools.list", 128, true, ""},
		{"DATA_EXPORT_v2", 128, true, ""},
		{"-leading-dash-", 128, true, ""},
		{strings.Repeat("a", 128), 128, true, ""},
		{strings.Repeat("a", 129), 128, false, "129 characters, over the limit of 128"},
		{strings.Repeat("a", 61), 60, false, "over the limit of 60"},
		{"user/update", 128, false, `'/'`},
		{"a b", 128, false, `' '`},
		{"caf\u00e9", 128, false, `'é'`},
		{"", 128, false, "is empty"},
	} {
		nc := checkNameRule(tc.name, "srv", NameRuleMCP, tc.maxLen)
		if nc.ok != tc.ok || !strings.Contains(nc.failure, tc.why) || (tc.ok && nc.failure != "") {
			t.Errorf("checkNameRule(%q, mcp, %d) = ok %v %q; want ok %v containing %q", tc.name, tc.maxLen, nc.ok, nc.failure, tc.ok, tc.why)
		}
		if !tc.ok && !strings.Contains(nc.failure, "MCP specification") {
			t.Errorf("failure %q does not name the rule", nc.failure)
		}
		for _, w := range nc.warnings {
			if strings.HasPrefix(w, "MCP spec") {
				t.Errorf("%q: the rule itself is repeated as a warning: %s", tc.name, w)
			}
		}
	}
}

func TestParseNameRule(t *testing.T) {
	for in, want := range map[string]NameRule{"": NameRulePostHog, "posthog": NameRulePostHog, "mcp": NameRuleMCP} {
		if got, err := ParseNameRule(in); err != nil || got != want {
			t.Errorf("ParseNameRule(%q) = %q, %v", in, got, err)
		}
	}
	for _, bad := range []string{"MCP", "kebab", "spec"} {
		if _, err := ParseNameRule(bad); err == nil || !strings.Contains(err.Error(), "posthog or mcp") {
			t.Errorf("ParseNameRule(%q): %v", bad, err)
		}
	}
}

// TestCheckNameRuleSetting: a snake_case server fails PostHog's rule on every tool and none
// under the MCP specification's; the report says which rule and length applied.
func TestCheckNameRuleSetting(t *testing.T) {
	tools := []Tool{{Name: "get_me", InputSchema: json.RawMessage(`{"type":"object"}`)}, {Name: "list_issues", InputSchema: json.RawMessage(`{"type":"object"}`)}}
	ph := Check(tools, Settings{})
	if ph.NameFailures != 2 || ph.NameRule != NameRulePostHog || ph.NameMaxLen != 52 {
		t.Fatalf("posthog rule: %d failures, rule %q, max %d", ph.NameFailures, ph.NameRule, ph.NameMaxLen)
	}
	mcp := Check(tools, Settings{NameRule: NameRuleMCP})
	if mcp.NameFailures != 0 || mcp.NameRule != NameRuleMCP || mcp.NameMaxLen != 128 {
		t.Fatalf("mcp rule: %d failures, rule %q, max %d", mcp.NameFailures, mcp.NameRule, mcp.NameMaxLen)
	}
	if short := Check(tools, Settings{NameRule: NameRuleMCP, NameMaxLen: 8}); short.NameFailures != 1 || !strings.Contains(short.PerTool[1].NameFailure, "over the limit of 8") {
		t.Fatalf("mcp rule, name_max_len 8: %+v", short.PerTool[1])
	}
}
