package schemacheck

import (
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode/utf8"

	"github.com/mattn/go-shellwords"

	"github.com/mcpulse/mcpulse/internal/safetext"
)

// What mcpulse schemacheck shows and reads beyond the check itself: the text report, the
// --header and --stdio parsing, and the choice of a ratchets.yaml server. cmd/mcpulse only
// wires these to its flags.

// PickServer loads the ratchets.yaml at path and returns its server named name, or its only
// server when name is empty; a missing name or an ambiguous file is an error listing the names.
func PickServer(path, name string) (ServerConfig, error) {
	cfg, err := LoadConfig(path)
	if err != nil {
		return ServerConfig{}, err
	}
	var names []string
	for _, s := range cfg.Servers {
		if name != "" && s.Name == name {
			return s, nil
		}
		names = append(names, s.Name)
	}
	switch {
	case name != "":
		return ServerConfig{}, fmt.Errorf("%s has no server %q (it has %s)", path, name, strings.Join(names, ", "))
	case len(cfg.Servers) > 1:
		return ServerConfig{}, fmt.Errorf("%s lists %d servers: pick one with --name (%s)", path, len(cfg.Servers), strings.Join(names, ", "))
	}
	return cfg.Servers[0], nil
}

// ParseHeaders reads --header flags, "Name: value", expanding $NAME and ${NAME} in values
// from the environment through lookup (as os.Expand does); a variable that is not set is an
// error, so a forgotten export never sends "Bearer " with no token. A name must be an HTTP
// token (RFC 9110) and a value must not hold a line break or NUL. Errors never quote a value
// (it may be a token).
func ParseHeaders(flags []string, lookup func(string) (string, bool)) (map[string]string, error) {
	if len(flags) == 0 {
		return nil, nil
	}
	headers := map[string]string{}
	for _, h := range flags {
		name, value, ok := strings.Cut(h, ":")
		name = strings.TrimSpace(name)
		if !ok || !headerNameRE.MatchString(name) {
			return nil, fmt.Errorf("--header %q: want \"Name: value\"", headerNameOnly(h))
		}
		value, missing := expandEnv(strings.TrimSpace(value), lookup)
		if len(missing) > 0 {
			return nil, fmt.Errorf("--header %s: $%s not set in the environment", name, strings.Join(missing, ", $"))
		}
		if strings.ContainsAny(value, "\r\n\x00") {
			return nil, fmt.Errorf("--header %s: the value holds a line break or NUL", name)
		}
		headers[name] = value
	}
	return headers, nil
}

var headerNameRE = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")

// headerNameOnly keeps a malformed --header's name part for the message, never its value (a
// token).
func headerNameOnly(h string) string {
	if name, _, ok := strings.Cut(h, ":"); ok {
		return name + ": …"
	}
	return "… (no ':')"
}

// SplitCommandLine splits a --stdio command line into words as a POSIX shell would (blanks
// separate words; 'single' and "double" quotes and backslashes quote), using
// github.com/mattn/go-shellwords, and refuses what would need a shell: pipes, lists,
// redirections and background jobs (|, ;, &, <, >), since the command is run without one.
// $VARS, globs and backquotes are kept literally. An empty line is an error.
func SplitCommandLine(s string) ([]string, error) {
	p := shellwords.NewParser()
	words, err := p.Parse(s)
	switch {
	case err != nil:
		return nil, fmt.Errorf("%v (an unterminated quote or a trailing backslash)", err)
	case p.Position >= 0 && p.Position < len(s):
		return nil, fmt.Errorf("%q at offset %d needs a shell, and the command runs without one: wrap it in a script, or quote it", shellOperator(s[p.Position:]), p.Position)
	case len(words) == 0:
		return nil, errors.New("empty command")
	}
	return words, nil
}

// shellOperator is the operator at the start of s, for the message.
func shellOperator(s string) string {
	for _, op := range []string{"&&", "||", ";;", ">>", "<<", "|", "&", ";", ">", "<"} {
		if strings.HasPrefix(s, op) {
			return op
		}
	}
	if r, _ := utf8.DecodeRuneInString(s); r != utf8.RuneError {
		return string(r)
	}
	return s
}

// WriteText writes a report for a person: what was checked (what, shown escaped), then the
// offenders (oversized tools, largest first; tools below the coverage ratchet; name failures;
// structural problems; client name warnings), the figures, each broken ratchet and the notes.
// limit caps the rows of each offender table (0: all). Every caller-chosen string (tool names,
// messages quoting them) is escaped, so a hostile server cannot rewrite the terminal.
func WriteText(w io.Writer, what string, s Settings, r *Report, limit int) {
	inject := s.InjectContext == nil || *s.InjectContext
	injection := "context injection on"
	if !inject {
		injection = "context injection off"
	}
	fmt.Fprintf(w, "Schema check of %s: %d %s, char limit %d, %s, name rule %s (at most %d characters)\n", safetext.Escape(what), r.Tools,
		plural(r.Tools, "tool", "tools"), r.CharLimit, injection, r.NameRule, r.NameMaxLen)

	table := func(title string, header string, rows [][]string) {
		if len(rows) == 0 {
			return
		}
		fmt.Fprintf(w, "\n%s\n", title)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintf(tw, "  %s\n", header)
		shown := rows
		if limit > 0 && len(rows) > limit {
			shown = rows[:limit]
		}
		for _, row := range shown {
			fmt.Fprintf(tw, "  %s\n", strings.Join(row, "\t"))
		}
		tw.Flush()
		if len(shown) < len(rows) {
			fmt.Fprintf(w, "  … and %d more (--limit 0 shows all, --format json gives everything)\n", len(rows)-len(shown))
		}
	}

	// Oversized tools, largest first.
	var over []ToolResult
	for _, t := range r.PerTool {
		if t.Oversized {
			over = append(over, t)
		}
	}
	sort.SliceStable(over, func(i, j int) bool { return over[i].SchemaChars > over[j].SchemaChars })
	var rows [][]string
	for _, t := range over {
		rows = append(rows, []string{displayName(t.Name), strconv.Itoa(t.SchemaChars), strconv.Itoa(t.SchemaChars - r.CharLimit + 1)})
	}
	table(fmt.Sprintf("OVERSIZED TOOLS (serialized size ≥ %d, largest first)", r.CharLimit), "TOOL\tCHARS\tTO CUT", rows)

	// Tools below the coverage ratchet, most undescribed nested parameters first.
	var low []ToolResult
	for _, t := range r.PerTool {
		if t.Nested > 0 && float64(t.Described)/float64(t.Nested) < r.MinNestedCoverage {
			low = append(low, t)
		}
	}
	sort.SliceStable(low, func(i, j int) bool { return low[i].Nested-low[i].Described > low[j].Nested-low[j].Described })
	rows = nil
	for _, t := range low {
		rows = append(rows, []string{displayName(t.Name), strconv.Itoa(t.Nested - t.Described), strconv.Itoa(t.Nested),
			share(float64(t.Described) / float64(t.Nested))})
	}
	table(fmt.Sprintf("LOW NESTED DESCRIPTION COVERAGE (tools below %s, most undescribed first)", share(r.MinNestedCoverage)),
		"TOOL\tUNDESCRIBED\tNESTED\tCOVERAGE", rows)

	rows = nil
	warned := 0
	for _, t := range r.PerTool {
		if !t.NameOK {
			rows = append(rows, []string{displayName(t.Name), safetext.Escape(t.NameFailure)})
		}
		if len(t.NameWarnings) > 0 {
			warned++
		}
	}
	table("NAME FAILURES", "TOOL\tWHY", rows)

	rows = nil
	for _, t := range r.PerTool {
		for _, p := range t.Problems {
			rows = append(rows, []string{displayName(t.Name), safetext.Escape(p)})
		}
	}
	table("STRUCTURAL PROBLEMS", "TOOL\tPROBLEM", rows)

	if warned > 0 {
		rows = nil
		for _, t := range r.PerTool {
			for _, warning := range t.NameWarnings {
				rows = append(rows, []string{displayName(t.Name), safetext.Escape(warning)})
			}
		}
		table("CLIENT NAME WARNINGS (reported, not failing)", "TOOL\tWARNING", rows)
	}

	fmt.Fprintf(w, "\nFIGURES\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  tools\t%d\n", r.Tools)
	fmt.Fprintf(tw, "  oversized (≥ %d chars)\t%d\t(ratchet: at most %d)\n", r.CharLimit, r.Oversized, r.MaxOversized)
	fmt.Fprintf(tw, "  nested description coverage\t%s\t(%d of %d nested parameters described; ratchet: at least %s)\n",
		share(r.NestedDescriptionCoverage), r.DescribedNestedProperties, r.NestedProperties, share(r.MinNestedCoverage))
	fmt.Fprintf(tw, "  full nested description coverage\t%s\t(%d of %d, with additionalProperties, items and $ref targets)\n",
		share(r.FullNestedDescriptionCoverage), r.FullDescribedNestedProperties, r.FullNestedProperties)
	fmt.Fprintf(tw, "  name failures\t%d\t(rule: %s)\n", r.NameFailures, r.NameRule)
	if r.TruncatedTools > 0 {
		fmt.Fprintf(tw, "  snapshots cut by the SDK\t%d\t(sizes are lower bounds)\n", r.TruncatedTools)
	}
	fmt.Fprintf(tw, "  tools with client name warnings\t%d\n", warned)
	fmt.Fprintf(tw, "  tools with structural problems\t%d\n", r.ToolsWithProblems)
	tw.Flush()

	if len(r.Violations) > 0 {
		fmt.Fprintf(w, "\nBROKEN %s\n", strings.ToUpper(plural(len(r.Violations), "ratchet", "ratchets")))
		for _, v := range r.Violations {
			fmt.Fprintf(w, "  ✗ %s\n", safetext.Escape(v))
		}
	}
	if len(r.Notes) > 0 {
		fmt.Fprintf(w, "\nNOTES\n")
		for _, n := range r.Notes {
			fmt.Fprintf(w, "  • %s\n", safetext.Escape(n))
		}
	}
	if r.OK() {
		fmt.Fprintf(w, "\nOK: every ratchet holds.\n")
	} else {
		fmt.Fprintf(w, "\nFAILED: %d %s broken (exit status 1).\n", len(r.Violations), plural(len(r.Violations), "ratchet", "ratchets"))
	}
}

// share formats a share as a percentage with one decimal, truncated (55.99% stays 55.9%,
// never rounding up past a ratchet).
func share(f float64) string {
	return strconv.FormatFloat(math.Floor(f*1000)/10, 'f', 1, 64) + "%"
}

// plainNameRE is a tool name that prints as it is.
var plainNameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)

// displayName prints an untrusted tool name safely: as it is when plain, otherwise quoted
// with every non-graphic character escaped (strconv.QuoteToGraphic), and cut when long.
func displayName(name string) string {
	if plainNameRE.MatchString(name) {
		return name
	}
	q := strconv.QuoteToGraphic(name)
	if utf8.RuneCountInString(q) > 100 {
		r := []rune(q)
		q = string(r[:97]) + "…\""
	}
	return q
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
