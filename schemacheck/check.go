package schemacheck

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Defaults for the per-server settings; each cites its source.
const (
	// DefaultCharLimit: Claude web and desktop silently drop a tool whose serialized
	// inputSchema reaches 16,384 characters (PostHog PR #111786, "feat(mcp): report ignored
	// input keys and cap tool schema growth", constant CLAUDE_REGISTRY_INPUT_SCHEMA_CHAR_LIMIT;
	// also PostHog's MCP tool guide). The ratchet's definitions: "default 16,384".
	DefaultCharLimit = 16384
	// DefaultNameMaxLen: PostHog's MCP tool guide, "tool names must be 52 characters or
	// fewer" (with the server name "posthog" and separators, the safe zone under Claude
	// Code's 64 and Cursor's 60). The ratchet's definitions: "default 52".
	DefaultNameMaxLen = 52
	// DefaultMaxOversized: the ratchet PostHog PR #111786 set, "44 tool schemas are already
	// at or over that size" (measured after the context injection). The ratchet's definitions: "default 44".
	DefaultMaxOversized = 44
	// DefaultMinNestedCoverage: PostHog PR #111786 fails "when the share of described nested
	// properties falls below 55%" (about 56% were described). The ratchet's definitions: "default 0.55".
	DefaultMinNestedCoverage = 0.55
)

// Tool is one tool as a server lists it: its name and its inputSchema, unparsed.
type Tool struct {
	Name        string
	InputSchema json.RawMessage
	// Description is the tool's description as served ("" when absent or not a string); the
	// check does not read it (served_tool_schemas keeps it beside the schema).
	Description string
	// Truncated says the schema is a snapshot the PostHog MCP analytics SDK cut or redacted
	// before sending it (LoadFromTraffic): its size is a lower bound (an oversized one is
	// certainly oversized), properties the SDK replaced are left out of the coverage counts,
	// and the SDK's markers are not reported as structural problems. A snapshot cut at its
	// root tells nothing: its size and coverage are unknown and it is not counted.
	Truncated bool
}

// Settings are the per-server settings of the check (ratchets.yaml). A zero value takes the
// default documented on each field.
type Settings struct {
	// ServerName is the server's name as clients show it, for the Claude Code
	// (mcp__<server>__<tool>) and Cursor (server + tool) name warnings. Default "".
	ServerName string
	// CharLimit is the client limit on the serialized size; a tool at or over it is
	// oversized. Default (<= 0) DefaultCharLimit, 16384.
	CharLimit int
	// NameMaxLen is the longest tool name, in characters, that passes the naming rule.
	// Default (<= 0) the rule's: DefaultNameMaxLen (52) for PostHog's, 128 for the MCP
	// specification's.
	NameMaxLen int
	// NameRule is the naming rule deciding ToolResult.NameOK. Default ("") DefaultNameRule,
	// PostHog's kebab-case rule.
	NameRule NameRule
	// InjectContext says whether the server's analytics SDK injects the `context` property
	// (see InjectContext) before registering tools; sizes are measured after it. Default
	// (nil) true.
	InjectContext *bool
	// ContextDescription is the injected property's description. Default ("")
	// DefaultContextDescription, 615 characters.
	ContextDescription string
	// MaxOversized is the oversized ratchet: the run fails when more tools are oversized.
	// Default (nil) DefaultMaxOversized, 44.
	MaxOversized *int
	// MinNestedCoverage is the coverage ratchet, a share in [0, 1]: the run fails when the
	// pooled nested description coverage is below it. Default (nil or NaN)
	// DefaultMinNestedCoverage, 0.55.
	MinNestedCoverage *float64
	// MaxTools fails the run when the server lists more tools. Default 0: no limit.
	MaxTools int
	// MaxToolChars fails the run when a tool's serialized size is over it. Default 0: no
	// limit.
	MaxToolChars int
}

// resolvedSettings are Settings with every default applied.
type resolvedSettings struct {
	server    string
	charLimit int
	nameMax   int
	nameRule  NameRule
	inject    bool
	desc      string
	maxOver   int
	minCov    float64
}

// resolved returns s with every default applied.
func (s Settings) resolved() resolvedSettings {
	r := resolvedSettings{
		server: s.ServerName, charLimit: s.CharLimit, nameMax: s.NameMaxLen, nameRule: s.NameRule,
		inject: true, desc: s.ContextDescription, maxOver: DefaultMaxOversized, minCov: DefaultMinNestedCoverage,
	}
	if r.charLimit <= 0 {
		r.charLimit = DefaultCharLimit
	}
	if r.nameRule != NameRuleMCP {
		r.nameRule = NameRulePostHog
	}
	if r.nameMax <= 0 {
		r.nameMax = r.nameRule.defaultMaxLen()
	}
	if s.InjectContext != nil {
		r.inject = *s.InjectContext
	}
	if r.desc == "" {
		r.desc = DefaultContextDescription
	}
	if s.MaxOversized != nil {
		r.maxOver = *s.MaxOversized
	}
	if s.MinNestedCoverage != nil && !math.IsNaN(*s.MinNestedCoverage) {
		r.minCov = *s.MinNestedCoverage
	}
	return r
}

// ToolResult is the check of one tool.
type ToolResult struct {
	Name string `json:"name"`
	// SchemaChars is the serialized size (UTF-16 units, after injection when enabled); 0
	// when the input schema is not valid JSON.
	SchemaChars int  `json:"schema_chars"`
	Oversized   bool `json:"oversized"`
	// Injected says whether the context property was added (injection on and applicable).
	Injected bool `json:"injected"`
	// Nested and Described are this tool's share of the pooled coverage figures;
	// FullNested and FullDescribed of the full figure.
	Nested        int `json:"nested"`
	Described     int `json:"described"`
	FullNested    int `json:"full_nested"`
	FullDescribed int `json:"full_described"`
	// NameOK says the name passes the naming rule; NameFailure says why not.
	NameOK       bool     `json:"name_ok"`
	NameFailure  string   `json:"name_failure,omitempty"`
	NameWarnings []string `json:"name_warnings"`
	Problems     []string `json:"problems"`
	// Unmeasured says the schema's size could not be measured (not valid JSON, or nested
	// deeper than the parser goes); such a tool breaks the run rather than passing as size 0.
	Unmeasured bool `json:"unmeasured,omitempty"`
	// Truncated says the schema is a snapshot the analytics SDK cut or redacted (see
	// Tool.Truncated): SchemaChars is a lower bound. Cut says it was cut at its root: nothing
	// about it is known, and it counts in no figure.
	Truncated bool `json:"truncated,omitempty"`
	Cut       bool `json:"cut,omitempty"`
}

// Report is the check of one server's tools.
type Report struct {
	Tools                         int          `json:"tools"`
	CharLimit                     int          `json:"char_limit"`
	NameRule                      NameRule     `json:"name_rule"`
	NameMaxLen                    int          `json:"name_max_len"`
	TruncatedTools                int          `json:"truncated_tools,omitempty"`
	Oversized                     int          `json:"oversized"`
	MaxOversized                  int          `json:"max_oversized"`
	NestedProperties              int          `json:"nested_properties"`
	DescribedNestedProperties     int          `json:"described_nested_properties"`
	NestedDescriptionCoverage     float64      `json:"nested_description_coverage"`
	MinNestedCoverage             float64      `json:"min_nested_coverage"`
	FullNestedProperties          int          `json:"full_nested_properties"`
	FullDescribedNestedProperties int          `json:"full_described_nested_properties"`
	FullNestedDescriptionCoverage float64      `json:"full_nested_description_coverage"`
	NameFailures                  int          `json:"name_failures"`
	ToolsWithProblems             int          `json:"tools_with_problems"`
	Violations                    []string     `json:"violations"`
	Notes                         []string     `json:"notes"`
	PerTool                       []ToolResult `json:"per_tool"`
}

// OK reports whether every ratchet holds (no violations).
func (r *Report) OK() bool { return r != nil && len(r.Violations) == 0 }

// coverageRatio is described/nested, 1.0 when there is nothing to describe (the ratchet's
// definitions: "1.0 when there are none").
func coverageRatio(described, nested int) float64 {
	if nested <= 0 {
		return 1
	}
	return float64(described) / float64(nested)
}

// Check checks a server's tools against its settings. It never panics: an input schema that
// is not JSON, not an object, too deep or structurally broken is reported in the tool's
// Problems, and a failure inside the check of one tool is reported there too.
//
// Ratchets (the ratchet's definitions, "Ratchets"): a violation when more tools are oversized
// than MaxOversized, when the pooled nested description coverage is below
// MinNestedCoverage, when there are more than MaxTools tools (if set) and when a tool's size
// is over MaxToolChars (if set). Notes say when a ratchet can be tightened, and summarizeReport
// name failures and structural problems, which are reported but do not fail the run.
func Check(tools []Tool, s Settings) *Report {
	rs := s.resolved()
	r := &Report{
		Tools:             len(tools),
		CharLimit:         rs.charLimit,
		NameRule:          rs.nameRule,
		NameMaxLen:        rs.nameMax,
		MaxOversized:      rs.maxOver,
		MinNestedCoverage: rs.minCov,
		Violations:        []string{},
		Notes:             []string{},
		PerTool:           make([]ToolResult, 0, len(tools)),
	}
	var buf []byte
	seen := make(map[string]int, len(tools))
	for i, t := range tools {
		tr, b := checkToolSafe(t, rs, buf)
		buf = b
		if first, dup := seen[t.Name]; dup {
			tr.Problems = append(tr.Problems, fmt.Sprintf("duplicate tool name %q (also tool #%d): clients keep only one of them; rename one", t.Name, first+1))
		} else {
			seen[t.Name] = i
		}
		r.PerTool = append(r.PerTool, tr)
	}
	summarizeReport(r, s)
	return r
}

// checkToolSafe runs checkTool and turns a panic (a bug) into a problem on that tool.
func checkToolSafe(t Tool, rs resolvedSettings, buf []byte) (tr ToolResult, out []byte) {
	defer func() {
		if p := recover(); p != nil {
			tr = ToolResult{Name: t.Name, NameWarnings: []string{}, Problems: []string{
				fmt.Sprintf("internal error while checking this tool (%v): please report it to the mcpulse maintainers with the tool's schema", p),
			}}
			out = nil
		}
	}()
	return checkTool(t, rs, buf)
}

// checkTool checks one tool. buf is scratch space for the serialization, returned for reuse.
func checkTool(t Tool, rs resolvedSettings, buf []byte) (ToolResult, []byte) {
	nc := checkNameRule(t.Name, rs.server, rs.nameRule, rs.nameMax)
	tr := ToolResult{
		Name:         t.Name,
		NameOK:       nc.ok,
		NameFailure:  nc.failure,
		NameWarnings: nc.warnings,
		Problems:     []string{},
		Truncated:    t.Truncated,
	}
	if len(t.InputSchema) == 0 {
		tr.Problems = append(tr.Problems, "the tool has no inputSchema: MCP requires one; declare {\"type\":\"object\"} for a tool without arguments")
		return tr, buf
	}
	root, err := parseJS(t.InputSchema)
	if err != nil {
		tr.Unmeasured = true
		if errors.Is(err, errTooDeep) {
			tr.Problems = append(tr.Problems, fmt.Sprintf("the inputSchema nests deeper than %d levels, so its size and coverage could not be measured: flatten it", maxNesting))
		} else {
			tr.Problems = append(tr.Problems, fmt.Sprintf("the inputSchema is not valid JSON (%v), so its size and coverage could not be measured: fix the server's schema", err))
		}
		return tr, buf
	}
	if t.Truncated && isSDKMarker(root) {
		tr.Cut = true
		return tr, buf
	}
	refs := &refResolver{root: root}
	basic, full, tooDeep := nestedCoverage(root, refs, t.Truncated)
	tr.Nested, tr.Described = basic.nested, basic.described
	tr.FullNested, tr.FullDescribed = full.nested, full.described
	tr.Problems = append(tr.Problems, structuralProblems(root, refs, t.Truncated)...)
	if tooDeep {
		tr.Problems = append(tr.Problems, fmt.Sprintf("the schema nests more than %d levels deep (counting $ref steps), so its coverage figures are partial: flatten it", maxWalkFrames))
	}
	served := root
	if rs.inject {
		served, tr.Injected = injectContext(root, rs.desc)
	}
	buf = appendJS(buf[:0], served)
	tr.SchemaChars = utf16Len(buf)
	tr.Oversized = tr.SchemaChars >= rs.charLimit
	return tr, buf
}

// summarizeReport fills the pooled figures, violations and notes.
func summarizeReport(r *Report, s Settings) {
	var over []ToolResult
	var tooBig []ToolResult
	withProblems := 0
	var badNames []string
	var cut []string
	for _, tr := range r.PerTool {
		if tr.Truncated {
			r.TruncatedTools++
		}
		if tr.Cut {
			cut = append(cut, tr.Name)
		}
		r.NestedProperties += tr.Nested
		r.DescribedNestedProperties += tr.Described
		r.FullNestedProperties += tr.FullNested
		r.FullDescribedNestedProperties += tr.FullDescribed
		if tr.Oversized {
			r.Oversized++
			over = append(over, tr)
		}
		if s.MaxToolChars > 0 && tr.SchemaChars > s.MaxToolChars {
			tooBig = append(tooBig, tr)
		}
		if !tr.NameOK {
			r.NameFailures++
			badNames = append(badNames, tr.Name)
		}
		if len(tr.Problems) > 0 {
			withProblems++
		}
	}
	r.ToolsWithProblems = withProblems
	r.NestedDescriptionCoverage = coverageRatio(r.DescribedNestedProperties, r.NestedProperties)
	r.FullNestedDescriptionCoverage = coverageRatio(r.FullDescribedNestedProperties, r.FullNestedProperties)

	switch {
	case r.Oversized > r.MaxOversized:
		r.Violations = append(r.Violations, fmt.Sprintf(
			"%d %s the %d-character client limit, above the ratchet of %d: shrink the largest schemas (%s; see per_tool) or raise max_oversized deliberately",
			r.Oversized, msgPlural(r.Oversized, "tool reaches", "tools reach"), r.CharLimit, r.MaxOversized, largestTools(over, 5)))
	case r.Oversized < r.MaxOversized:
		reach := fmt.Sprintf("only %d %s", r.Oversized, msgPlural(r.Oversized, "tool reaches", "tools reach"))
		if r.Oversized == 0 {
			reach = "no tool reaches"
		}
		r.Notes = append(r.Notes, fmt.Sprintf(
			"ratchet can be lowered to %d: %s the %d-character client limit, below max_oversized %d; set max_oversized to %d so the count can only go down",
			r.Oversized, reach, r.CharLimit, r.MaxOversized, r.Oversized))
	}

	if r.NestedDescriptionCoverage < r.MinNestedCoverage {
		r.Violations = append(r.Violations, fmt.Sprintf(
			"nested description coverage is %s (%d of %d nested properties described), below the ratchet of %s: add descriptions to nested properties (least covered: %s) or lower min_nested_coverage deliberately",
			fmtPercent(r.NestedDescriptionCoverage), r.DescribedNestedProperties, r.NestedProperties, fmtPercent(r.MinNestedCoverage), leastCovered(r.PerTool, 5)))
	} else if raise := math.Floor(r.NestedDescriptionCoverage*100) / 100; raise > r.MinNestedCoverage {
		r.Notes = append(r.Notes, fmt.Sprintf(
			"nested description coverage is %s, above the ratchet of %s: min_nested_coverage can be raised to %.2f so the share cannot fall back",
			fmtPercent(r.NestedDescriptionCoverage), fmtPercent(r.MinNestedCoverage), raise))
	}

	var unmeasured []string
	for _, tr := range r.PerTool {
		if tr.Unmeasured {
			unmeasured = append(unmeasured, tr.Name)
		}
	}
	if len(unmeasured) > 0 {
		r.Violations = append(r.Violations, fmt.Sprintf(
			"%d %s could not be measured (%s; see their problems): a schema whose size is unknown cannot be held to the ratchets, fix %s",
			len(unmeasured), msgPlural(len(unmeasured), "tool", "tools"), strings.Join(quoteNames(unmeasured, 5), ", "), msgPlural(len(unmeasured), "it", "them")))
	}

	if s.MaxTools > 0 && r.Tools > s.MaxTools {
		r.Violations = append(r.Violations, fmt.Sprintf(
			"the server lists %d tools, above max_tools %d: remove or merge tools, or raise max_tools deliberately", r.Tools, s.MaxTools))
	}
	if len(tooBig) > 0 {
		r.Violations = append(r.Violations, fmt.Sprintf(
			"%d %s over the per-tool limit of %d characters (%s): shrink %s or raise max_tool_chars deliberately",
			len(tooBig), msgPlural(len(tooBig), "tool is", "tools are"), s.MaxToolChars, largestTools(tooBig, 5), msgPlural(len(tooBig), "it", "them")))
	}

	if r.NameFailures > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf(
			"%d tool %s the naming rule (%s): %s; rename them (see name_failure in per_tool), or choose the naming rule your clients need (name_rule)",
			r.NameFailures, msgPlural(r.NameFailures, "name breaks", "names break"), r.NameRule.describe(r.NameMaxLen), firstNames(badNames, 5)))
	}
	if r.TruncatedTools > 0 {
		note := fmt.Sprintf("the snapshots of %d %s were cut or redacted by the analytics SDK before it sent them: sizes are lower bounds (an oversized one is certainly oversized) and the properties it replaced are not counted in the coverage",
			r.TruncatedTools, msgPlural(r.TruncatedTools, "tool", "tools"))
		if len(cut) > 0 {
			note += fmt.Sprintf("; %d %s cut whole (%s), so nothing about %s is known: check the server itself for %s",
				len(cut), msgPlural(len(cut), "was", "were"), strings.Join(quoteNames(cut, 5), ", "), msgPlural(len(cut), "it", "them"), msgPlural(len(cut), "it", "them"))
		}
		r.Notes = append(r.Notes, note)
	}
	if withProblems > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf(
			"%d %s structural problems (see problems in per_tool): fix them in the server's schemas",
			withProblems, msgPlural(withProblems, "tool has", "tools have")))
	}
}

func msgPlural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// fmtPercent formats a share as a percentage with one decimal, truncated toward zero so that a
// share just below a ratchet never prints as equal to it.
func fmtPercent(f float64) string {
	return fmt.Sprintf("%.1f%%", math.Floor(f*1000)/10)
}

// largestTools lists up to n tools by descending size, "name (size)".
func largestTools(trs []ToolResult, n int) string {
	s := append([]ToolResult(nil), trs...)
	sort.SliceStable(s, func(i, j int) bool { return s[i].SchemaChars > s[j].SchemaChars })
	var parts []string
	for i, tr := range s {
		if i == n {
			parts = append(parts, fmt.Sprintf("and %d more", len(s)-n))
			break
		}
		parts = append(parts, fmt.Sprintf("%s (%d)", toolDisplayName(tr.Name), tr.SchemaChars))
	}
	return strings.Join(parts, ", ")
}

// leastCovered lists up to n tools with the most undescribed nested properties.
func leastCovered(trs []ToolResult, n int) string {
	var s []ToolResult
	for _, tr := range trs {
		if tr.Nested > tr.Described {
			s = append(s, tr)
		}
	}
	sort.SliceStable(s, func(i, j int) bool {
		return s[i].Nested-s[i].Described > s[j].Nested-s[j].Described
	})
	var parts []string
	for i, tr := range s {
		if i == n {
			parts = append(parts, fmt.Sprintf("and %d more", len(s)-n))
			break
		}
		parts = append(parts, fmt.Sprintf("%s (%d of %d undescribed)", toolDisplayName(tr.Name), tr.Nested-tr.Described, tr.Nested))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func firstNames(names []string, n int) string {
	var parts []string
	for i, name := range names {
		if i == n {
			parts = append(parts, fmt.Sprintf("and %d more", len(names)-n))
			break
		}
		parts = append(parts, toolDisplayName(name))
	}
	return strings.Join(parts, ", ")
}

// toolDisplayName quotes a tool name for a message when it is not plain printable ASCII, and
// shortens very long names.
func toolDisplayName(name string) string {
	plain := name != ""
	for i := 0; i < len(name); i++ {
		if name[i] <= ' ' || name[i] >= 0x7f || name[i] == ',' || name[i] == '(' || name[i] == ')' {
			plain = false
			break
		}
	}
	if utf8.RuneCountInString(name) > 80 {
		r := []rune(name)
		name, plain = string(r[:77])+"...", false
	}
	if plain {
		return name
	}
	return fmt.Sprintf("%q", name)
}

// quoteNames quotes up to n names for a message (caller-chosen text), then counts the rest.
func quoteNames(names []string, n int) []string {
	out := make([]string, 0, min(len(names), n)+1)
	for i, name := range names {
		if i == n {
			out = append(out, fmt.Sprintf("and %d more", len(names)-n))
			break
		}
		out = append(out, strconv.QuoteToGraphic(name))
	}
	return out
}
