package schemacheck

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Tool names, issue 4, Definitions: "at most `name_max_len` (default 52) characters and
// matching `^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?$`; additionally report per-client warnings:
// over 64 characters once prefixed `mcp__<server>__` (Claude Code), server name + tool name
// over 60 (Cursor), not matching `^[a-zA-Z0-9_-]{1,64}$` (OpenAI), not matching the MCP
// spec's `^[A-Za-z0-9_.-]{1,128}$`."
//
// The first rule (lowercase kebab-case, at most 52 characters) is PostHog's; it decides
// ToolResult.NameOK. The client rules only warn. Lengths are counted in characters (Unicode
// code points; an invalid UTF-8 byte counts as one), which for the ASCII names the rules
// allow equals bytes and UTF-16 units.

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

// checkName applies the naming rule and the client warnings. An empty server name still
// gets the Claude Code and Cursor checks: the prefix is then as short as it can be, so any
// warning raised is certain.
func checkName(name, server string, maxLen int) nameCheck {
	n := utf8.RuneCountInString(name)
	nc := nameCheck{warnings: []string{}}

	var why []string
	if n > maxLen {
		why = append(why, fmt.Sprintf("is %d characters, over the limit of %d", n, maxLen))
	}
	if !matchKebab(name) {
		switch {
		case name == "":
			why = append(why, "is empty")
		case !allIn(name, isKebabChar):
			why = append(why, fmt.Sprintf("contains %s, outside lowercase letters, digits and '-'", quoteFirstBad(name, isKebabChar)))
		default:
			why = append(why, "starts or ends with '-'")
		}
	}
	nc.ok = len(why) == 0
	if !nc.ok {
		nc.failure = fmt.Sprintf("tool name %q %s: PostHog's rule is at most %d characters matching ^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?$ (lowercase kebab-case); rename the tool", name, strings.Join(why, " and "), maxLen)
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
	if !(n >= 1 && n <= mcpSpecMaxLen && allIn(name, isMCPSpecChar)) {
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
