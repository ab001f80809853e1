package schemacheck

import (
	"fmt"
	"math"
	"strings"
)

// Limits are a server's ratchet settings as a person gives them, in ratchets.yaml or as
// mcpulse schemacheck flags; nil means not given (the default applies). Both places check
// them with LimitProblems and apply them with ApplyLimits, so a value means the same, and is
// refused the same way, wherever it is written.
type Limits struct {
	CharLimit          *int
	MaxOversized       *int
	MinNestedCoverage  *float64
	NameRule           *string
	NameMaxLen         *int
	MaxTools           *int
	MaxToolChars       *int
	InjectContext      *bool
	ContextDescription *string
}

// Namer spells a setting, given its ratchets.yaml key, for a message: YAMLKey or FlagName.
type Namer func(key string) string

// YAMLKey spells a setting as its ratchets.yaml key ("char_limit").
func YAMLKey(key string) string { return key }

// FlagName spells a setting as its mcpulse schemacheck flag ("--char-limit").
func FlagName(key string) string {
	if key == "inject_context" {
		return "--no-inject-context"
	}
	return "--" + strings.ReplaceAll(key, "_", "-")
}

// Problems lists what is wrong with the limits, one message per setting, each naming the
// setting as name spells it. traffic says the tools come from traffic snapshots, which are
// already served schemas: injecting the context parameter does not apply to them.
func (l Limits) Problems(name Namer, traffic bool) []string {
	var p []string
	bad := func(key string, v any, want string) {
		p = append(p, fmt.Sprintf("%s is %v: %s", name(key), v, want))
	}
	if v := l.CharLimit; v != nil && *v <= 0 {
		bad("char_limit", *v, fmt.Sprintf("want a positive size in characters (omit it for the default, %d)", DefaultCharLimit))
	}
	if v := l.MaxOversized; v != nil && *v < 0 {
		bad("max_oversized", *v, "want 0 or more")
	}
	if v := l.MinNestedCoverage; v != nil && !(*v >= 0 && *v <= 1) {
		bad("min_nested_coverage", *v, "want a share between 0 and 1 (0.55 is 55%)")
	}
	if v := l.NameRule; v != nil {
		if _, err := ParseNameRule(*v); err != nil || *v == "" {
			bad("name_rule", fmt.Sprintf("%q", *v), fmt.Sprintf("want %s (PostHog's kebab-case rule, the default) or %s (the MCP specification's)", NameRulePostHog, NameRuleMCP))
		}
	}
	if v := l.NameMaxLen; v != nil && *v <= 0 {
		bad("name_max_len", *v, "want a positive length (omit it for the rule's default: 52 for posthog, 128 for mcp)")
	}
	if v := l.MaxTools; v != nil && *v < 0 {
		bad("max_tools", *v, "want 0 (no limit) or more")
	}
	if v := l.MaxToolChars; v != nil && *v < 0 {
		bad("max_tool_chars", *v, "want 0 (no limit) or more")
	}
	if traffic {
		if l.InjectContext != nil && *l.InjectContext {
			p = append(p, fmt.Sprintf("%s does not apply to traffic: the snapshots are the schemas as served, with the SDK's context parameter already in them", name("inject_context")))
		}
		if l.ContextDescription != nil && *l.ContextDescription != "" {
			p = append(p, fmt.Sprintf("%s does not apply to traffic: the snapshots hold the description the SDK served", name("context_description")))
		}
	}
	return p
}

// ApplyLimits sets the given limits on s (ungiven ones keep s's values).
func ApplyLimits(l Limits, s *Settings) {
	if l.CharLimit != nil {
		s.CharLimit = *l.CharLimit
	}
	if l.MaxOversized != nil {
		s.MaxOversized = new(*l.MaxOversized)
	}
	if l.MinNestedCoverage != nil && !math.IsNaN(*l.MinNestedCoverage) {
		s.MinNestedCoverage = new(*l.MinNestedCoverage)
	}
	if l.NameRule != nil {
		if r, err := ParseNameRule(*l.NameRule); err == nil {
			s.NameRule = r
		}
	}
	if l.NameMaxLen != nil {
		s.NameMaxLen = *l.NameMaxLen
	}
	if l.MaxTools != nil {
		s.MaxTools = *l.MaxTools
	}
	if l.MaxToolChars != nil {
		s.MaxToolChars = *l.MaxToolChars
	}
	if l.InjectContext != nil {
		s.InjectContext = new(*l.InjectContext)
	}
	if l.ContextDescription != nil {
		s.ContextDescription = *l.ContextDescription
	}
}
