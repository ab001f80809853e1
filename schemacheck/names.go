package schemacheck

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Tool names, the schema ratchet's definitions: "at most `name_max_len` (default 52) characters and
// matching `^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?$`; additionally report per-client warnings:
// over 64 characters once prefixed `mcp__<server>__` (Claude Code), server name + tool name
// over 60 (Cursor), not matching `^[a-zA-Z0-9_-]{1,64}$` (OpenAI), not matching the MCP
// spec's `^[A-Za-z0-9_.-]{1,128}$`."
//
// The naming rule decides ToolResult.NameOK; it is selectable (Settings.NameRule), because a
// server that names its tools in snake_case breaks PostHog's rule on every tool while following
// the MCP specification. The client rules only warn. Lengths are counted in characters
// (Unicode code points; an invalid UTF-8 byte counts as one), which for the ASCII names the
// rules allow equals bytes and UTF-16 units.

// NameRule is the naming rule that decides whether a tool name passes.
type NameRule string

const (
	// NameRulePostHog is PostHog's rule (its MCP tool guide): lowercase kebab-case,
	// ^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?$, at most name_max_len characters (default 52). The
	// default, as before the rule was selectable.
	NameRulePostHog NameRule = "posthog"
	// NameRuleMCP is the MCP specification's (2025-11-25, server/tools, "Tool Names"): 1 to 128
	// characters of ASCII letters, digits, '_', '-' and '.' (name_max_len, when set, lowers the
	// 128).
	NameRuleMCP NameRule = "mcp"
)

// DefaultNameRule is the rule when none is configured.
const DefaultNameRule = NameRulePostHog

// NameRules lists the rules, for help texts and messages.
var NameRules = []NameRule{NameRulePostHog, NameRuleMCP}

// ParseNameRule reads a rule name ("posthog" or "mcp"; "" is the default).
func ParseNameRule(s string) (NameRule, error) {
	switch r := NameRule(s); r {
	case "":
		return DefaultNameRule, nil
	case NameRulePostHog, NameRuleMCP:
		return r, nil
	}
	return "", fmt.Errorf("unknown name rule %q: want %s or %s", s, NameRulePostHog, NameRuleMCP)
}

// defaultMaxLen is the rule's longest name when name_max_len is not set.
func (r NameRule) defaultMaxLen() int {
	if r == NameRuleMCP {
		return mcpSpecMaxLen
	}
	return DefaultNameMaxLen
}

// describe says what the rule allows, for messages.
func (r NameRule) describe(maxLen int) string {
	if r == NameRuleMCP {
		return fmt.Sprintf("the MCP specification's rule: 1 to %d characters of A-Z, a-z, 0-9, '_', '-' and '.'", maxLen)
	}
	return fmt.Sprintf("PostHog's rule: at most %d characters matching ^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?$ (lowercase kebab-case)", maxLen)
}

// Client limits from the table in PostHog's MCP tool guide (seed 004).
const (
	claudeCodeMaxLen = 64  // "mcp__<server>__<tool>"
	cursorMaxLen     = 60  // len(server) + len(tool)
	openAIMaxLen     = 64  // ^[a-zA-Z0-9_-]{1,64}$
	mcpSpecMaxLen    = 128 // ^[A-Za-z0-9_.-]{1,128}$
)

// nameCheck is the outcome of the name rules for one tool.
type nameCheck struct {
	ok       bool
	failure  string   // why !ok, empty when ok
	warnings []string // per-client warnings, never nil
}

// checkName applies PostHog's naming rule and the client warnings (checkNameRule).
func checkName(name, server string, maxLen int) nameCheck {
	return checkNameRule(name, server, NameRulePostHog, maxLen)
}

// checkNameRule applies the naming rule and the client warnings. An empty server name still
// gets the Claude Code and Cursor checks: the prefix is then as short as it can be, so any
// warning raised is certain.
func checkNameRule(name, server string, rule NameRule, maxLen int) nameCheck {
	n := utf8.RuneCountInString(name)
	nc := nameCheck{warnings: []string{}}

	var why []string
	if n > maxLen {
		why = append(why, fmt.Sprintf("is %d characters, over the limit of %d", n, maxLen))
	}
	switch {
	case name == "":
		why = append(why, "is empty")
	case rule == NameRuleMCP:
		if !allIn(name, isMCPSpecChar) {
			why = append(why, fmt.Sprintf("contains %s, outside ASCII letters, digits, '_', '-' and '.'", quoteFirstBad(name, isMCPSpecChar)))
		}
	case !matchKebab(name):
		if !allIn(name, isKebabChar) {
			why = append(why, fmt.Sprintf("contains %s, outside lowercase letters, digits and '-'", quoteFirstBad(name, isKebabChar)))
		} else {
			why = append(why, "starts or ends with '-'")
		}
	}
	nc.ok = len(why) == 0
	if !nc.ok {
		nc.failure = fmt.Sprintf("tool name %q %s: %s; rename the tool", name, strings.Join(why, " and "), rule.describe(maxLen))
	}

	if full := utf8.RuneCountInString(server) + n + len("mcp__") + len("__"); full > claudeCodeMaxLen {
		nc.warnings = append(nc.warnings, fmt.Sprintf("Claude Code: mcp__%s__%s is %d characters, over its %d-character limit on prefixed tool names; shorten the tool or server name", server, name, full, claudeCodeMaxLen))
	}
	if comb := utf8.RuneCountInString(server) + n; comb > cursorMaxLen {
		nc.warnings = append(nc.warnings, fmt.Sprintf("Cursor: server name + tool name is %d characters, over its %d-character combined limit, and Cursor silently filters such tools; shorten the tool or server name", comb, cursorMaxLen))
	}
	if !(n >= 1 && n <= openAIMaxLen && allIn(name, isOpenAIChar)) {
		nc.warnings = append(nc.warnings, fmt.Sprintf("OpenAI: %q does not match ^[a-zA-Z0-9_-]{1,64}$ (letters, digits, '_' and '-' only, at most 64 characters), so OpenAI function calling rejects it; rename the tool", name))
	}
	if rule != NameRuleMCP && !(n >= 1 && n <= mcpSpecMaxLen && allIn(name, isMCPSpecChar)) {
		nc.warnings = append(nc.warnings, fmt.Sprintf("MCP spec: %q does not match ^[A-Za-z0-9_.-]{1,128}$ (the specification's recommended tool names); rename the tool", name))
	}
	return nc
}

func isLowerAlnum(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }
func isKebabChar(c byte) bool  { return isLowerAlnum(c) || c == '-' }
func isOpenAIChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}
func isMCPSpecChar(c byte) bool { return isOpenAIChar(c) || c == '.' }

// allIn reports whether every byte of s satisfies ok (all the classes are ASCII, so any
// byte of a multi-byte character fails, as the regular expressions would).
func allIn(s string, ok func(byte) bool) bool {
	for i := 0; i < len(s); i++ {
		if !ok(s[i]) {
			return false
		}
	}
	return true
}

// matchKebab reports whether s matches ^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?$.
func matchKebab(s string) bool {
	return s != "" && allIn(s, isKebabChar) && isLowerAlnum(s[0]) && isLowerAlnum(s[len(s)-1])
}

// quoteFirstBad quotes the first character of s that ok rejects.
func quoteFirstBad(s string, ok func(byte) bool) string {
	for i := 0; i < len(s); i++ {
		if !ok(s[i]) {
			r, _ := utf8.DecodeRuneInString(s[i:])
			return fmt.Sprintf("%q", r)
		}
	}
	return "nothing"
}
