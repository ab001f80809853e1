package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/mcpulse/mcpulse/schemacheck"
)

// schemacheckOptions are the flags of mcpulse schemacheck.
type schemacheckOptions struct {
	server     string
	headers    []string
	stdio      string
	toolsFile  string
	config     string
	name       string
	timeout    time.Duration
	format     string
	limit      int
	serverName string

	charLimit          int
	maxOversized       int
	minNestedCoverage  float64
	nameMaxLen         int
	maxTools           int
	maxToolChars       int
	noInjectContext    bool
	contextDescription string
}

func newSchemacheckCmd() *cobra.Command {
	var o schemacheckOptions
	cmd := &cobra.Command{
		Use:   "schemacheck (--server URL [--header 'Name: value']... | --stdio 'command args' | --tools-file F | --config ratchets.yaml [--name SERVER]) [flags]",
		Short: "Check an MCP server's tool schemas against the ratchets: size, description coverage, names",
		Long: `Lists an MCP server's tools (or reads them from a file) and checks their input schemas
against the schema ratchets (issue 4), once, now:

  size       the serialized size of each tool's inputSchema — the UTF-16 length of its compact
             JSON after the analytics "context" parameter is injected — against the client
             limit (--char-limit, default 16384: Claude web and desktop drop a tool that
             reaches it); the run fails when more tools are oversized than --max-oversized
  coverage   the share of nested parameters (below the top level) that carry a description;
             the run fails below --min-nested-coverage
  names      the naming rule (at most --name-max-len characters of [a-z0-9-]) and the limits
             of Claude Code, Cursor, OpenAI and the MCP spec (reported, not failing)
  problems   structural faults of a schema (reported, not failing)

Where the tools come from (exactly one):
  --server URL           a Streamable HTTP endpoint; --header adds request headers, whose
                         values may name environment variables as $NAME or ${NAME} (quote
                         them for the shell, so the token stays out of shell history)
  --stdio "cmd args"     a local server started over stdio; the command line is split into
                         words like a shell would (quotes, backslashes) but run without one:
                         no $VARS, globs or pipes
  --tools-file F         a saved tools/list result ({"tools":[...]}), a JSON array of tools,
                         one tool object, a bare input schema, or a directory of *.json/*.snap
                         files each holding a tool object or a bare schema named <tool>.json
  --config FILE          a server of a ratchets.yaml (see ratchets.example.yaml): its source
                         and ratchets; --name picks the server when the file has several.
                         Ratchet flags given on the command line override the file.

Text output lists the offenders first (oversized tools by size, tools with low coverage, name
failures, structural problems), then the figures, then each broken ratchet with what to do.
--format json prints the full report instead.

Exit status: 0 when every ratchet holds, 1 when one breaks, 2 when the check could not run
(server unreachable, authentication refused, timeout, invalid tools or flags).`,
		Example: `  # production, token from the environment (single quotes: expanded by mcpulse, not the shell)
  mcpulse schemacheck --server https://mcp.posthog.com/mcp --header 'Authorization: Bearer $POSTHOG_MCP_TOKEN'

  # a local stdio server, with a stricter ratchet
  mcpulse schemacheck --stdio "node dist/index.js --read-only" --max-oversized 0 --server-name posthog

  # saved schemas, as JSON for a script
  mcpulse schemacheck --tools-file testdata/mcp-tool-schemas/github-mcp-server --format json

  # one server of a ratchets file, as the scheduler checks it
  mcpulse schemacheck --config ratchets.yaml --name posthog`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return schemacheckUsage(cmd, fmt.Errorf("unexpected argument %q: the source is a flag (--server, --stdio, --tools-file or --config)", args[0]))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error { return runSchemacheck(cmd, &o) },
	}
	cmd.SetFlagErrorFunc(schemacheckUsage)
	f := cmd.Flags()
	f.StringVar(&o.server, "server", "", "Streamable HTTP endpoint of the MCP server")
	f.StringArrayVar(&o.headers, "header", nil, `request header "Name: value" for --server or a url server of --config (repeatable); $NAME and ${NAME} in the value are read from the environment`)
	f.StringVar(&o.stdio, "stdio", "", `command line of a stdio MCP server, e.g. "node dist/index.js" (split into words, run without a shell)`)
	f.StringVar(&o.toolsFile, "tools-file", "", "file or directory of saved tools (tools/list result, array of tools, tool object, bare schemas)")
	f.StringVar(&o.config, "config", "", "ratchets.yaml to take the server and its ratchets from")
	f.StringVar(&o.name, "name", "", "server of --config to check (needed when it lists several)")
	f.DurationVar(&o.timeout, "timeout", schemacheck.DefaultTimeout, "bound on listing the server's tools (connect, initialize, every page)")
	f.StringVar(&o.format, "format", "text", "output: text or json")
	f.IntVar(&o.limit, "limit", 20, "rows per offender table in text output (0: all)")
	f.StringVar(&o.serverName, "server-name", "", "server name clients prefix tool names with, for the name limits (default: --config's name)")
	f.IntVar(&o.charLimit, "char-limit", schemacheck.DefaultCharLimit, "serialized size at which a tool is oversized")
	f.IntVar(&o.maxOversized, "max-oversized", schemacheck.DefaultMaxOversized, "ratchet: most oversized tools allowed")
	f.Float64Var(&o.minNestedCoverage, "min-nested-coverage", schemacheck.DefaultMinNestedCoverage, "ratchet: least share (0 to 1) of nested parameters with a description")
	f.IntVar(&o.nameMaxLen, "name-max-len", schemacheck.DefaultNameMaxLen, "longest tool name the naming rule allows")
	f.IntVar(&o.maxTools, "max-tools", 0, "ratchet: most tools allowed (0: no limit)")
	f.IntVar(&o.maxToolChars, "max-tool-chars", 0, "ratchet: largest serialized size allowed for any tool (0: no limit)")
	f.BoolVar(&o.noInjectContext, "no-inject-context", false, `measure sizes without the injected "context" parameter (servers without PostHog's MCP analytics SDK)`)
	f.StringVar(&o.contextDescription, "context-description", "", "description of the injected context parameter (default: the built-in 615-character text)")
	return cmd
}

// schemacheckUsage reports a usage problem: exit status 2, the check did not run.
func schemacheckUsage(cmd *cobra.Command, err error) error {
	return schemacheckCannotRun(cmd, fmt.Errorf("%v (see %s --help)", err, cmd.CommandPath()))
}

// schemacheckCannotRun prints why the check could not run and ends with exit status 2.
func schemacheckCannotRun(cmd *cobra.Command, err error) error {
	msg := strings.TrimPrefix(err.Error(), "schemacheck: ")
	fmt.Fprintf(cmd.ErrOrStderr(), "mcpulse schemacheck: %s\n", scSafeText(msg))
	return exitCodeError{code: 2, msg: msg}
}

func runSchemacheck(cmd *cobra.Command, o *schemacheckOptions) error {
	flags := cmd.Flags()
	sources := 0
	for _, s := range []string{o.server, o.stdio, o.toolsFile, o.config} {
		if s != "" {
			sources++
		}
	}
	if sources != 1 {
		return schemacheckUsage(cmd, errors.New("give exactly one of --server, --stdio, --tools-file and --config"))
	}
	if o.format != "text" && o.format != "json" {
		return schemacheckUsage(cmd, fmt.Errorf("--format %q: want text or json", o.format))
	}
	if o.name != "" && o.config == "" {
		return schemacheckUsage(cmd, errors.New("--name picks a server of --config"))
	}
	if len(o.headers) > 0 && o.stdio != "" || len(o.headers) > 0 && o.toolsFile != "" {
		return schemacheckUsage(cmd, errors.New("--header applies to --server (or a url server of --config)"))
	}
	if o.limit < 0 {
		return schemacheckUsage(cmd, errors.New("--limit: want 0 (all) or more"))
	}
	headers, err := parseHeaderFlags(o.headers, os.LookupEnv)
	if err != nil {
		return schemacheckUsage(cmd, err)
	}

	var settings schemacheck.Settings
	var src schemacheck.Source
	var what string
	switch {
	case o.config != "":
		server, err := pickServer(o.config, o.name)
		if err != nil {
			return schemacheckCannotRun(cmd, err)
		}
		settings = server.Settings()
		src, err = server.Source(os.Getenv)
		if err != nil {
			return schemacheckCannotRun(cmd, err)
		}
		if len(headers) > 0 && src.URL == "" {
			return schemacheckUsage(cmd, fmt.Errorf("--header: server %q of %s is a stdio server", server.Name, o.config))
		}
		what = fmt.Sprintf("server %s (%s)", server.Name, src)
	case o.server != "":
		src.URL = o.server
		what = o.server
	case o.stdio != "":
		argv, err := splitCommandLine(o.stdio)
		if err != nil {
			return schemacheckUsage(cmd, fmt.Errorf("--stdio: %v", err))
		}
		if len(argv) == 0 {
			return schemacheckUsage(cmd, errors.New("--stdio: empty command"))
		}
		src.Command = argv
		what = "stdio server " + o.stdio
	default:
		what = o.toolsFile
	}
	if len(headers) > 0 {
		if src.Headers == nil {
			src.Headers = map[string]string{}
		}
		for k, v := range headers {
			src.Headers[k] = v
		}
	}
	if flags.Changed("timeout") || src.Timeout == 0 {
		src.Timeout = o.timeout
	}
	if err := applySettingFlags(cmd, o, &settings); err != nil {
		return schemacheckUsage(cmd, err)
	}

	var tools []schemacheck.Tool
	if o.toolsFile != "" {
		var warnings []string
		tools, warnings, err = schemacheck.LoadFromFile(o.toolsFile)
		for _, w := range warnings {
			fmt.Fprintf(cmd.ErrOrStderr(), "mcpulse schemacheck: warning: %s\n", scSafeText(w))
		}
	} else {
		tools, err = schemacheck.LoadFromServer(cmd.Context(), src)
	}
	if err != nil {
		return schemacheckCannotRun(cmd, err)
	}

	report := schemacheck.Check(tools, settings)
	out := cmd.OutOrStdout()
	if o.format == "json" {
		enc := newJSONEncoder(out)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		if err := enc.Encode(report); err != nil {
			return schemacheckCannotRun(cmd, err)
		}
	} else {
		writeSchemacheckText(out, what, settings, report, o.limit)
	}
	if !report.OK() {
		return exitCodeError{code: 1, msg: fmt.Sprintf("%d schema %s broken", len(report.Violations), scPlural(len(report.Violations), "ratchet", "ratchets"))}
	}
	return nil
}

// pickServer loads the config and returns the server named name, or its only server.
func pickServer(path, name string) (schemacheck.ServerConfig, error) {
	cfg, err := schemacheck.LoadConfig(path)
	if err != nil {
		return schemacheck.ServerConfig{}, err
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
		return schemacheck.ServerConfig{}, fmt.Errorf("%s has no server %q (it has %s)", path, name, strings.Join(names, ", "))
	case len(cfg.Servers) > 1:
		return schemacheck.ServerConfig{}, fmt.Errorf("%s lists %d servers: pick one with --name (%s)", path, len(cfg.Servers), strings.Join(names, ", "))
	}
	return cfg.Servers[0], nil
}

// applySettingFlags puts the ratchet flags given on the command line over settings.
func applySettingFlags(cmd *cobra.Command, o *schemacheckOptions, s *schemacheck.Settings) error {
	changed := cmd.Flags().Changed
	if changed("server-name") {
		s.ServerName = o.serverName
	}
	if changed("char-limit") {
		if o.charLimit <= 0 {
			return fmt.Errorf("--char-limit %d: want a positive size", o.charLimit)
		}
		s.CharLimit = o.charLimit
	}
	if changed("max-oversized") {
		if o.maxOversized < 0 {
			return fmt.Errorf("--max-oversized %d: want 0 or more", o.maxOversized)
		}
		s.MaxOversized = &o.maxOversized
	}
	if changed("min-nested-coverage") {
		if !(o.minNestedCoverage >= 0 && o.minNestedCoverage <= 1) {
			return fmt.Errorf("--min-nested-coverage %v: want a share between 0 and 1 (0.55 is 55%%)", o.minNestedCoverage)
		}
		s.MinNestedCoverage = &o.minNestedCoverage
	}
	if changed("name-max-len") {
		if o.nameMaxLen <= 0 {
			return fmt.Errorf("--name-max-len %d: want a positive length", o.nameMaxLen)
		}
		s.NameMaxLen = o.nameMaxLen
	}
	if changed("max-tools") {
		if o.maxTools < 0 {
			return fmt.Errorf("--max-tools %d: want 0 (no limit) or more", o.maxTools)
		}
		s.MaxTools = o.maxTools
	}
	if changed("max-tool-chars") {
		if o.maxToolChars < 0 {
			return fmt.Errorf("--max-tool-chars %d: want 0 (no limit) or more", o.maxToolChars)
		}
		s.MaxToolChars = o.maxToolChars
	}
	if changed("no-inject-context") {
		inject := !o.noInjectContext
		s.InjectContext = &inject
	}
	if changed("context-description") {
		s.ContextDescription = o.contextDescription
	}
	return nil
}

// parseHeaderFlags reads "Name: value" headers, expanding $NAME and ${NAME} in values from
// the environment (as os.ExpandEnv does); a variable that is not set is an error, so a
// forgotten export never sends "Bearer " with no token.
func parseHeaderFlags(flags []string, lookup func(string) (string, bool)) (map[string]string, error) {
	if len(flags) == 0 {
		return nil, nil
	}
	headers := map[string]string{}
	for _, h := range flags {
		name, value, ok := strings.Cut(h, ":")
		name = strings.TrimSpace(name)
		if !ok || !scHeaderNameRE.MatchString(name) {
			return nil, fmt.Errorf("--header %q: want \"Name: value\"", headerNameOnly(h))
		}
		var missing []string
		value = os.Expand(strings.TrimSpace(value), func(v string) string {
			val, ok := lookup(v)
			if !ok {
				missing = append(missing, "$"+v)
			}
			return val
		})
		if len(missing) > 0 {
			return nil, fmt.Errorf("--header %s: %s not set in the environment", name, strings.Join(missing, ", "))
		}
		if strings.ContainsAny(value, "\r\n\x00") {
			return nil, fmt.Errorf("--header %s: the value holds a line break or NUL", name)
		}
		headers[name] = value
	}
	return headers, nil
}

var scHeaderNameRE = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")

// headerNameOnly keeps a malformed --header's name part for the message, never its value (a
// token).
func headerNameOnly(h string) string {
	if name, _, ok := strings.Cut(h, ":"); ok {
		return name + ": …"
	}
	return "… (no ':')"
}

// splitCommandLine splits a command line into words as a POSIX shell does, without expanding
// anything: blanks separate words; 'single quotes' keep everything; "double quotes" keep
// everything but \" \\ \$ and \`; a backslash outside quotes keeps the next character.
func splitCommandLine(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case c == '\'':
			end := strings.IndexByte(s[i+1:], '\'')
			if end < 0 {
				return nil, errors.New("unterminated single quote")
			}
			cur.WriteString(s[i+1 : i+1+end])
			i += end + 1
			inWord = true
		case c == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("\"\\$`\n", s[i+1]) >= 0 {
					i++
				}
				cur.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, errors.New("unterminated double quote")
			}
			inWord = true
		case c == '\\':
			if i+1 >= len(s) {
				return nil, errors.New("trailing backslash")
			}
			i++
			cur.WriteByte(s[i])
			inWord = true
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

// writeSchemacheckText writes the text report: offenders, figures, broken ratchets, notes.
func writeSchemacheckText(w io.Writer, what string, s schemacheck.Settings, r *schemacheck.Report, limit int) {
	inject := s.InjectContext == nil || *s.InjectContext
	injection := "context injection on"
	if !inject {
		injection = "context injection off"
	}
	fmt.Fprintf(w, "Schema check of %s: %d %s, char limit %d, %s\n", scSafeText(what), r.Tools,
		scPlural(r.Tools, "tool", "tools"), r.CharLimit, injection)

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
	var over []schemacheck.ToolResult
	for _, t := range r.PerTool {
		if t.Oversized {
			over = append(over, t)
		}
	}
	sort.SliceStable(over, func(i, j int) bool { return over[i].SchemaChars > over[j].SchemaChars })
	var rows [][]string
	for _, t := range over {
		rows = append(rows, []string{scDisplayName(t.Name), strconv.Itoa(t.SchemaChars), strconv.Itoa(t.SchemaChars - r.CharLimit + 1)})
	}
	table(fmt.Sprintf("OVERSIZED TOOLS (serialized size ≥ %d, largest first)", r.CharLimit), "TOOL\tCHARS\tTO CUT", rows)

	// Tools below the coverage ratchet, most undescribed nested parameters first.
	var low []schemacheck.ToolResult
	for _, t := range r.PerTool {
		if t.Nested > 0 && float64(t.Described)/float64(t.Nested) < r.MinNestedCoverage {
			low = append(low, t)
		}
	}
	sort.SliceStable(low, func(i, j int) bool { return low[i].Nested-low[i].Described > low[j].Nested-low[j].Described })
	rows = nil
	for _, t := range low {
		rows = append(rows, []string{scDisplayName(t.Name), strconv.Itoa(t.Nested - t.Described), strconv.Itoa(t.Nested),
			scShare(float64(t.Described) / float64(t.Nested))})
	}
	table(fmt.Sprintf("LOW NESTED DESCRIPTION COVERAGE (tools below %s, most undescribed first)", scShare(r.MinNestedCoverage)),
		"TOOL\tUNDESCRIBED\tNESTED\tCOVERAGE", rows)

	rows = nil
	warned := 0
	for _, t := range r.PerTool {
		if !t.NameOK {
			rows = append(rows, []string{scDisplayName(t.Name), scSafeText(t.NameFailure)})
		}
		if len(t.NameWarnings) > 0 {
			warned++
		}
	}
	table("NAME FAILURES", "TOOL\tWHY", rows)

	rows = nil
	for _, t := range r.PerTool {
		for _, p := range t.Problems {
			rows = append(rows, []string{scDisplayName(t.Name), scSafeText(p)})
		}
	}
	table("STRUCTURAL PROBLEMS", "TOOL\tPROBLEM", rows)

	if warned > 0 {
		rows = nil
		for _, t := range r.PerTool {
			for _, warning := range t.NameWarnings {
				rows = append(rows, []string{scDisplayName(t.Name), scSafeText(warning)})
			}
		}
		table("CLIENT NAME WARNINGS (reported, not failing)", "TOOL\tWARNING", rows)
	}

	fmt.Fprintf(w, "\nFIGURES\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  tools\t%d\n", r.Tools)
	fmt.Fprintf(tw, "  oversized (≥ %d chars)\t%d\t(ratchet: at most %d)\n", r.CharLimit, r.Oversized, r.MaxOversized)
	fmt.Fprintf(tw, "  nested description coverage\t%s\t(%d of %d nested parameters described; ratchet: at least %s)\n",
		scShare(r.NestedDescriptionCoverage), r.DescribedNestedProperties, r.NestedProperties, scShare(r.MinNestedCoverage))
	fmt.Fprintf(tw, "  full nested description coverage\t%s\t(%d of %d, with additionalProperties, items and $ref targets)\n",
		scShare(r.FullNestedDescriptionCoverage), r.FullDescribedNestedProperties, r.FullNestedProperties)
	fmt.Fprintf(tw, "  name failures\t%d\n", r.NameFailures)
	fmt.Fprintf(tw, "  tools with client name warnings\t%d\n", warned)
	fmt.Fprintf(tw, "  tools with structural problems\t%d\n", r.ToolsWithProblems)
	tw.Flush()

	if len(r.Violations) > 0 {
		fmt.Fprintf(w, "\nBROKEN %s\n", strings.ToUpper(scPlural(len(r.Violations), "ratchet", "ratchets")))
		for _, v := range r.Violations {
			fmt.Fprintf(w, "  ✗ %s\n", scSafeText(v))
		}
	}
	if len(r.Notes) > 0 {
		fmt.Fprintf(w, "\nNOTES\n")
		for _, n := range r.Notes {
			fmt.Fprintf(w, "  • %s\n", scSafeText(n))
		}
	}
	if r.OK() {
		fmt.Fprintf(w, "\nOK: every ratchet holds.\n")
	} else {
		fmt.Fprintf(w, "\nFAILED: %d %s broken (exit status 1).\n", len(r.Violations), scPlural(len(r.Violations), "ratchet", "ratchets"))
	}
}

// scShare formats a share as a percentage with one decimal, truncated (55.99% stays 55.9%,
// never rounding up past a ratchet).
func scShare(f float64) string {
	return strconv.FormatFloat(math.Floor(f*1000)/10, 'f', 1, 64) + "%"
}

// scPlainNameRE is a tool name that prints as it is.
var scPlainNameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)

// scDisplayName prints an untrusted tool name safely: as it is when plain, otherwise quoted
// with every non-graphic character escaped (strconv.QuoteToGraphic), and cut when long.
func scDisplayName(name string) string {
	if scPlainNameRE.MatchString(name) {
		return name
	}
	q := strconv.QuoteToGraphic(name)
	if utf8.RuneCountInString(q) > 100 {
		r := []rune(q)
		q = string(r[:97]) + "…\""
	}
	return q
}

// scSafeText escapes the non-graphic characters (controls, bidi overrides, tabs) of a message
// that may quote tool or parameter names, so a hostile server cannot rewrite the terminal.
func scSafeText(s string) string {
	clean := true
	for _, r := range s {
		if !unicode.IsGraphic(r) || r == utf8.RuneError {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if unicode.IsGraphic(r) && r != utf8.RuneError {
			b.WriteRune(r)
			continue
		}
		q := strconv.QuoteRuneToGraphic(r)
		b.WriteString(q[1 : len(q)-1])
	}
	return b.String()
}

func scPlural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
