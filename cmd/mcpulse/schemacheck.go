package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/mcpulse/mcpulse/internal/safetext"
	"github.com/mcpulse/mcpulse/internal/stores"
	"github.com/mcpulse/mcpulse/schemacheck"
)

// schemacheckOptions are the flags of mcpulse schemacheck.
type schemacheckOptions struct {
	server        string
	headers       []string
	stdio         string
	toolsFile     string
	config        string
	fromTraffic   bool
	name          string
	timeout       time.Duration
	format        string
	limit         int
	serverName    string
	serverVersion string
	clickhouse    string
	store         bool

	charLimit          int
	maxOversized       int
	minNestedCoverage  float64
	nameRule           string
	nameMaxLen         int
	maxTools           int
	maxToolChars       int
	noInjectContext    bool
	contextDescription string
}

func newSchemacheckCmd() *cobra.Command {
	var o schemacheckOptions
	cmd := &cobra.Command{
		Use:   "schemacheck (--server URL [--header 'Name: value']... | --stdio 'command args' | --tools-file F | --from-traffic --server-name NAME [--server-version V] | --config ratchets.yaml [--name SERVER]) [--store] [flags]",
		Short: "Check an MCP server's tool schemas against the ratchets: size, description coverage, names",
		Long: `Lists an MCP server's tools (or reads them from a file, or from the schemas seen in traffic)
and checks their input schemas against the schema ratchets, once, now:

  size       the serialized size of each tool's inputSchema — the UTF-16 length of its compact
             JSON after the analytics "context" parameter is injected — against the client
             limit (--char-limit, default 16384: Claude web and desktop drop a tool that
             reaches it); the run fails when more tools are oversized than --max-oversized
  coverage   the share of nested parameters (below the top level) that carry a description;
             the run fails below --min-nested-coverage
  names      the naming rule (--name-rule posthog, the default: at most --name-max-len, 52,
             characters of [a-z0-9-]; --name-rule mcp: the MCP specification's 1 to 128
             characters of [A-Za-z0-9_.-], which snake_case passes) and the limits of Claude
             Code, Cursor, OpenAI and the MCP spec (reported, not failing)
  problems   structural faults of a schema (reported, not failing)

Where the tools come from (exactly one):
  --server URL           a Streamable HTTP endpoint; --header adds request headers, whose
                         values may name environment variables as $NAME or ${NAME} (quote
                         them for the shell, so the token stays out of shell history)
  --stdio "cmd args"     a local server started over stdio; the command line is split into
                         words like a shell would (quotes, backslashes) but run without one:
                         no $VARS, globs, pipes or redirections
  --tools-file F         a saved tools/list result ({"tools":[...]}), a JSON array of tools,
                         one tool object, a bare input schema, or a directory of *.json/*.snap
                         files each holding a tool object or a bare schema named <tool>.json
  --from-traffic         the schemas the server served in the $mcp_tools_list events mcpulse
                         received from the PostHog MCP analytics SDK (ClickHouse, --clickhouse):
                         --server-name is the server's own name ($mcp_server_name),
                         --server-version picks a version (default: the one seen most recently).
                         No credentials, no network path to the server. The snapshots are
                         served schemas (the SDK's context is in them), so nothing is injected;
                         a snapshot the SDK cut counts with a lower-bound size.
  --config FILE          a server of a ratchets.yaml (see ratchets.example.yaml): its source
                         (url, command or traffic) and ratchets; --name picks the server when
                         the file has several. Ratchet flags given on the command line override
                         the file.

Storing a check (--store): the check is also recorded in ClickHouse (--clickhouse), as the
same rows the scheduler's ratchet job writes for each of its runs (schema_check_runs and
schema_check_tools), under the server name (--server-name, or the --config server's name), so
the Schema ratchet dashboard of "mcpulse dashboards" shows it beside the scheduled runs. The
run records where its tools came from: "file" for --tools-file, "traffic" for --from-traffic
(with the version checked), "server" for a listing. A listing (--server, --stdio, a url or
command server of --config) also stores the tools served in served_tool_schemas, under the
name and version the server gives itself in its initialize result (serverInfo), as the
scheduled check does: the consumer reads a server version's schemas there for calls traced
without them (@traceloop/instrumentation-mcp's spans), so their ignored keys are measured
(store_served_schemas: false in --config's file leaves them out). A check that could not run
stores nothing.
The ratchet-broken alert watches production: it counts listings and traffic, not files.

Text output lists the offenders first (oversized tools by size, tools with low coverage, name
failures, structural problems), then the figures, then each broken ratchet with what to do.
--format json prints the full report instead.

Exit status: 0 when every ratchet holds, 1 when one breaks, 2 when the check could not run
(server unreachable, authentication refused, timeout, nothing seen in traffic, invalid tools
or flags) or, with --store, could not be stored.`,
		Example: `  # production, token from the environment (single quotes: expanded by mcpulse, not the shell)
  mcpulse schemacheck --server https://mcp.posthog.com/mcp --header 'Authorization: Bearer $POSTHOG_MCP_TOKEN'

  # a local stdio server, with a stricter ratchet
  mcpulse schemacheck --stdio "node dist/index.js --read-only" --max-oversized 0 --server-name posthog

  # a snake_case server, held to the MCP specification's naming rule
  mcpulse schemacheck --tools-file testdata/mcp-tool-schemas/github-mcp-server --name-rule mcp --format json

  # what an instrumented server served in traffic, latest version, no access to the server
  mcpulse schemacheck --from-traffic --server-name posthog --clickhouse clickhouse://localhost:9000

  # one server of a ratchets file, as the scheduler checks it
  mcpulse schemacheck --config ratchets.yaml --name posthog

  # a saved tools/list result, stored so the Schema ratchet dashboard shows it
  mcpulse schemacheck --tools-file tools.json --server-name posthog --store --clickhouse clickhouse://localhost:9000`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return schemacheckUsage(cmd, fmt.Errorf("unexpected argument %s: the source is a flag (--server, --stdio, --tools-file, --from-traffic or --config)", safetext.Quote(args[0])))
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
	f.BoolVar(&o.fromTraffic, "from-traffic", false, "check the schemas seen in traffic ($mcp_tools_list events) for --server-name, from ClickHouse")
	f.StringVar(&o.config, "config", "", "ratchets.yaml to take the server and its ratchets from")
	f.StringVar(&o.name, "name", "", "server of --config to check (needed when it lists several)")
	f.DurationVar(&o.timeout, "timeout", schemacheck.DefaultTimeout, "bound on listing the server's tools (connect, initialize, every page) or reading its snapshots")
	f.StringVar(&o.format, "format", "text", "output: text or json")
	f.IntVar(&o.limit, "limit", 20, "rows per offender table in text output (0: all)")
	f.StringVar(&o.serverName, "server-name", "", "server name: the one clients prefix tool names with, for the name limits (default: --config's name); with --from-traffic, the server whose snapshots are read ($mcp_server_name)")
	f.StringVar(&o.serverVersion, "server-version", "", `with --from-traffic: the server version to check ($mcp_server_version; "" is a server that reports none; default: the version seen most recently)`)
	f.StringVar(&o.clickhouse, "clickhouse", os.Getenv(stores.EnvClickHouseDSN), "ClickHouse DSN for --from-traffic, traffic servers of --config and --store, native protocol (default $"+stores.EnvClickHouseDSN+")")
	f.BoolVar(&o.store, "store", false, "also record the check in ClickHouse (schema_check_runs, schema_check_tools: the rows the scheduler writes) under --server-name or the --config server's name, for the Schema ratchet dashboard; a server's listing also goes to served_tool_schemas under its serverInfo name and version")
	f.IntVar(&o.charLimit, "char-limit", schemacheck.DefaultCharLimit, "serialized size at which a tool is oversized")
	f.IntVar(&o.maxOversized, "max-oversized", schemacheck.DefaultMaxOversized, "ratchet: most oversized tools allowed")
	f.Float64Var(&o.minNestedCoverage, "min-nested-coverage", schemacheck.DefaultMinNestedCoverage, "ratchet: least share (0 to 1) of nested parameters with a description")
	f.StringVar(&o.nameRule, "name-rule", string(schemacheck.DefaultNameRule), "naming rule a tool name must pass: posthog (lowercase kebab-case, PostHog's) or mcp (the MCP specification's)")
	f.IntVar(&o.nameMaxLen, "name-max-len", 0, "longest tool name the naming rule allows (default: 52 for posthog, 128 for mcp)")
	f.IntVar(&o.maxTools, "max-tools", 0, "ratchet: most tools allowed (0: no limit)")
	f.IntVar(&o.maxToolChars, "max-tool-chars", 0, "ratchet: largest serialized size allowed for any tool (0: no limit)")
	f.BoolVar(&o.noInjectContext, "no-inject-context", false, `measure sizes without the injected "context" parameter (servers without PostHog's MCP analytics SDK)`)
	f.StringVar(&o.contextDescription, "context-description", "", `description of the injected context parameter (default: a built-in text that serializes to the length of the SDK's default)`)
	return cmd
}

// schemacheckUsage reports a usage problem: exit status 2, the check did not run.
func schemacheckUsage(cmd *cobra.Command, err error) error {
	return schemacheckCannotRun(cmd, fmt.Errorf("%v (see %s --help)", err, cmd.CommandPath()))
}

// schemacheckCannotRun prints why the check could not run and ends with exit status 2.
func schemacheckCannotRun(cmd *cobra.Command, err error) error {
	msg := strings.TrimPrefix(err.Error(), "schemacheck: ")
	fmt.Fprintf(cmd.ErrOrStderr(), "mcpulse schemacheck: %s\n", safetext.Escape(msg))
	return exitCodeError{code: 2, msg: msg}
}

// flagLimits are the ratchet flags given on the command line (the others stay nil).
func flagLimits(cmd *cobra.Command, o *schemacheckOptions) schemacheck.Limits {
	changed := cmd.Flags().Changed
	var l schemacheck.Limits
	if changed("char-limit") {
		l.CharLimit = &o.charLimit
	}
	if changed("max-oversized") {
		l.MaxOversized = &o.maxOversized
	}
	if changed("min-nested-coverage") {
		l.MinNestedCoverage = &o.minNestedCoverage
	}
	if changed("name-rule") {
		l.NameRule = &o.nameRule
	}
	if changed("name-max-len") {
		l.NameMaxLen = &o.nameMaxLen
	}
	if changed("max-tools") {
		l.MaxTools = &o.maxTools
	}
	if changed("max-tool-chars") {
		l.MaxToolChars = &o.maxToolChars
	}
	if changed("no-inject-context") {
		l.InjectContext = new(!o.noInjectContext)
	}
	if changed("context-description") {
		l.ContextDescription = &o.contextDescription
	}
	return l
}

func runSchemacheck(cmd *cobra.Command, o *schemacheckOptions) error {
	flags := cmd.Flags()
	sources := 0
	for _, given := range []bool{o.server != "", o.stdio != "", o.toolsFile != "", o.config != "", o.fromTraffic} {
		if given {
			sources++
		}
	}
	if sources != 1 {
		return schemacheckUsage(cmd, errors.New("give exactly one of --server, --stdio, --tools-file, --from-traffic and --config"))
	}
	if o.format != "text" && o.format != "json" {
		return schemacheckUsage(cmd, fmt.Errorf("--format %s: want text or json", safetext.Quote(o.format)))
	}
	if o.name != "" && o.config == "" {
		return schemacheckUsage(cmd, errors.New("--name picks a server of --config"))
	}
	if len(o.headers) > 0 && (o.stdio != "" || o.toolsFile != "" || o.fromTraffic) {
		return schemacheckUsage(cmd, errors.New("--header applies to --server (or a url server of --config)"))
	}
	if flags.Changed("server-version") && !o.fromTraffic {
		return schemacheckUsage(cmd, errors.New("--server-version applies to --from-traffic"))
	}
	if o.fromTraffic && o.serverName == "" {
		return schemacheckUsage(cmd, errors.New("--from-traffic needs --server-name: the server's name as the MCP SDK reports it ($mcp_server_name)"))
	}
	if o.limit < 0 {
		return schemacheckUsage(cmd, errors.New("--limit: want 0 (all) or more"))
	}
	headers, err := schemacheck.ParseHeaders(o.headers, os.LookupEnv)
	if err != nil {
		return schemacheckUsage(cmd, err)
	}

	var settings schemacheck.Settings
	var src schemacheck.Source
	var traffic *schemacheck.TrafficSource
	var what string
	source := schemacheck.RunFromServer // where the tools come from, for --store
	storeServed := true                 // --store also stores a listing's served schemas
	switch {
	case o.config != "":
		server, err := schemacheck.PickServer(o.config, o.name)
		if err != nil {
			return schemacheckCannotRun(cmd, err)
		}
		settings = server.Settings()
		storeServed = server.StoresServedSchemas()
		if server.Traffic != nil {
			t := server.Traffic.Source()
			traffic = &t
			source = schemacheck.RunFromTraffic
			what = fmt.Sprintf("server %s (%s)", server.Name, t)
			break
		}
		src, err = server.Source(os.Getenv)
		if err != nil {
			return schemacheckCannotRun(cmd, err)
		}
		if len(headers) > 0 && src.URL == "" {
			return schemacheckUsage(cmd, fmt.Errorf("--header: server %s of %s is a stdio server", safetext.Quote(server.Name), o.config))
		}
		what = fmt.Sprintf("server %s (%s)", server.Name, src)
	case o.fromTraffic:
		t := schemacheck.TrafficSource{ServerName: o.serverName}
		if flags.Changed("server-version") {
			t.ServerVersion = &o.serverVersion
		}
		traffic = &t
		source = schemacheck.RunFromTraffic
		settings.InjectContext = new(false) // the snapshots are served schemas
		what = t.String()
	case o.server != "":
		src.URL = o.server
		what = o.server
	case o.stdio != "":
		argv, err := schemacheck.SplitCommandLine(o.stdio)
		if err != nil {
			return schemacheckUsage(cmd, fmt.Errorf("--stdio: %v", err))
		}
		src.Command = argv
		what = "stdio server " + o.stdio
	default:
		source = schemacheck.RunFromFile
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
	limits := flagLimits(cmd, o)
	if problems := limits.Problems(schemacheck.FlagName, traffic != nil); len(problems) > 0 {
		return schemacheckUsage(cmd, errors.New(strings.Join(problems, "; ")))
	}
	schemacheck.ApplyLimits(limits, &settings)
	if flags.Changed("server-name") {
		settings.ServerName = o.serverName
	}
	if o.store && settings.ServerName == "" {
		return schemacheckUsage(cmd, errors.New("--store needs --server-name: the name the run is stored and charted under"))
	}
	if o.store && o.clickhouse == "" {
		return schemacheckUsage(cmd, fmt.Errorf("--store writes to ClickHouse: give --clickhouse or set $%s", stores.EnvClickHouseDSN))
	}
	run := schemacheck.NewRun(settings.ServerName, source, time.Now())

	var tools []schemacheck.Tool
	var listing *schemacheck.Listing // what a server was listed
	switch {
	case o.toolsFile != "":
		var warnings []string
		tools, warnings, err = schemacheck.LoadFromFile(o.toolsFile)
		for _, w := range warnings {
			fmt.Fprintf(cmd.ErrOrStderr(), "mcpulse schemacheck: warning: %s\n", safetext.Escape(w))
		}
	case traffic != nil:
		tools, run.ServerVersion, what, err = loadTraffic(cmd, o, *traffic, what)
	default:
		var l schemacheck.Listing
		if l, err = schemacheck.LoadListing(cmd.Context(), src); err == nil {
			tools, listing = l.Tools, &l
		}
	}
	if err != nil {
		return schemacheckCannotRun(cmd, err)
	}

	report := schemacheck.Check(tools, settings)
	run.Report, run.Duration = report, time.Since(run.StartedAt)
	out := cmd.OutOrStdout()
	if o.format == "json" {
		enc := newJSONEncoder(out)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		if err := enc.Encode(report); err != nil {
			return schemacheckCannotRun(cmd, err)
		}
	} else {
		schemacheck.WriteText(out, what, settings, report, o.limit)
	}
	if o.store {
		if !storeServed {
			listing = nil
		}
		if err := storeRun(cmd, o, run, listing); err != nil {
			return schemacheckCannotRun(cmd, fmt.Errorf("the check ran but was not stored: %w", err))
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "mcpulse schemacheck: stored as run %s of server %q (source %s) in schema_check_runs and schema_check_tools\n",
			run.ID, safetext.Escape(run.Server), run.Source)
	}
	if !report.OK() {
		n := len(report.Violations)
		return exitCodeError{code: 1, msg: fmt.Sprintf("%d schema %s broken", n, map[bool]string{true: "ratchet", false: "ratchets"}[n == 1])}
	}
	return nil
}

// loadTraffic reads the snapshots of a traffic source from ClickHouse, within --timeout, and
// says which version was checked.
func loadTraffic(cmd *cobra.Command, o *schemacheckOptions, t schemacheck.TrafficSource, what string) (tools []schemacheck.Tool, version, described string, err error) {
	if o.clickhouse == "" {
		return nil, "", what, fmt.Errorf("the schemas seen in traffic are in ClickHouse: give --clickhouse or set $%s", stores.EnvClickHouseDSN)
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), o.timeout)
	defer cancel()
	ch, err := stores.OpenClickHouse(ctx, o.clickhouse)
	if err != nil {
		return nil, "", what, err
	}
	defer ch.Close()
	snap, err := schemacheck.LoadFromTraffic(ctx, ch, t)
	if err != nil {
		return nil, "", what, err
	}
	return snap.Tools, snap.ServerVersion, fmt.Sprintf("%s: version %q, seen %s to %s", what, snap.ServerVersion,
		snap.FirstSeen.Format(time.RFC3339), snap.LastSeen.Format(time.RFC3339)), nil
}

// storeRun records a check that ran (--store) through schemacheck.StoreRun and, when listing
// is not nil (tools listed from a server), its served schemas through
// schemacheck.StoreServedSchemas, as the scheduler's ratchet job does, within --timeout. A
// server whose serverInfo has no name gets a warning, not a failure.
func storeRun(cmd *cobra.Command, o *schemacheckOptions, run schemacheck.Run, listing *schemacheck.Listing) error {
	ctx, cancel := context.WithTimeout(cmd.Context(), o.timeout)
	defer cancel()
	ch, err := stores.OpenClickHouse(ctx, o.clickhouse)
	if err != nil {
		return err
	}
	defer ch.Close()
	if err := schemacheck.StoreRun(ctx, ch, run); err != nil {
		return err
	}
	if listing == nil {
		return nil
	}
	n, err := schemacheck.StoreServedSchemas(ctx, ch, run, *listing)
	switch {
	case errors.Is(err, schemacheck.ErrNoServerName):
		fmt.Fprintf(cmd.ErrOrStderr(), "mcpulse schemacheck: warning: served schemas not stored: %v\n", err)
	case err != nil:
		return fmt.Errorf("served schemas: %w", err)
	default:
		fmt.Fprintf(cmd.ErrOrStderr(), "mcpulse schemacheck: stored the %d tools served in served_tool_schemas under the server's serverInfo %q version %q\n",
			n, safetext.Escape(listing.Server.Name), safetext.Escape(listing.Server.Version))
	}
	return nil
}
