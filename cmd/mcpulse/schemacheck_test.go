package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpulse/mcpulse/dashboards"
	"github.com/mcpulse/mcpulse/demo/mcptest"
	"github.com/mcpulse/mcpulse/sql"
	"github.com/mcpulse/mcpulse/testkit/testenv"
)

func runSchemacheckCmd(t *testing.T, args ...string) (error, string, string) {
	t.Helper()
	cmd := newSchemacheckCmd()
	cmd.SilenceUsage, cmd.SilenceErrors = true, true // as under the root command
	var stdout, stderr bytes.Buffer
	cmd.SetOut(&stdout)
	cmd.SetErr(&stderr)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(context.Background())
	return err, stdout.String(), stderr.String()
}

func exitCode(err error) int {
	var exit exitCodeError
	if errors.As(err, &exit) {
		return exit.code
	}
	if err != nil {
		return -1
	}
	return 0
}

// TestSchemacheckWiring: the command only wires the package; usage problems exit 2 with one
// line, and a limit is refused the same way from a flag as from ratchets.yaml.
func TestSchemacheckWiring(t *testing.T) {
	corpus := filepath.Join("..", "..", "testdata", "mcp-tool-schemas", "github-mcp-server")
	dir := t.TempDir()
	cfg := filepath.Join(dir, "ratchets.yaml")
	if err := os.WriteFile(cfg, []byte("servers:\n  - name: gh\n    command: [\"true\"]\n    char_limit: 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--tools-file", corpus, "--char-limit", "0"}, 2, "--char-limit is 0: want a positive size"},
		{[]string{"--config", cfg}, 2, "char_limit is 0: want a positive size"},
		{[]string{"--tools-file", corpus, "--name-rule", "kebab"}, 2, `--name-rule is "kebab": want posthog`},
		{[]string{"--from-traffic"}, 2, "--from-traffic needs --server-name"},
		{[]string{"--from-traffic", "--server-name", "x", "--no-inject-context=false"}, 2, "--no-inject-context does not apply to traffic"},
		{[]string{"--tools-file", corpus, "--server-version", "1"}, 2, "--server-version applies to --from-traffic"},
		{[]string{"--from-traffic", "--server-name", "x", "--clickhouse", ""}, 2, "give --clickhouse"},
		{[]string{"--stdio", "node srv.js | tee log"}, 2, `--stdio: "|" at offset 12 needs a shell`},
		{[]string{"--server", "http://x", "--tools-file", corpus}, 2, "give exactly one of"},
	} {
		err, _, stderr := runSchemacheckCmd(t, tc.args...)
		if exitCode(err) != tc.code || !strings.Contains(stderr, tc.want) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%q: exit %d, stderr %q; want exit %d and %q", tc.args, exitCode(err), stderr, tc.code, tc.want)
		}
	}

	// github-mcp-server names its tools in snake_case: every name breaks PostHog's rule, none
	// the MCP specification's.
	for rule, wantFailures := range map[string]bool{"posthog": true, "mcp": false} {
		err, stdout, stderr := runSchemacheckCmd(t, "--tools-file", corpus, "--name-rule", rule, "--no-inject-context", "--format", "json",
			"--max-oversized", "100", "--min-nested-coverage", "0")
		if err != nil {
			t.Fatalf("%s: %v %s", rule, err, stderr)
		}
		var r struct {
			Tools        int    `json:"tools"`
			NameFailures int    `json:"name_failures"`
			NameRule     string `json:"name_rule"`
		}
		if err := json.Unmarshal([]byte(stdout), &r); err != nil {
			t.Fatal(err)
		}
		if r.NameRule != rule || (r.NameFailures == r.Tools) != wantFailures || (r.NameFailures == 0) == wantFailures || r.Tools < 10 {
			t.Errorf("--name-rule %s: %+v", rule, r)
		}
	}
}

// --from-traffic reads the snapshots the consumer stored (ClickHouse 18.16): the latest version
// by default, --server-version for another; sizes as served, nothing injected.
func TestSchemacheckFromTraffic(t *testing.T) {
	e := testenv.New(t, testenv.Options{})
	ctx := context.Background()
	batch, err := e.ClickHouse.PrepareBatch(ctx, `INSERT INTO mcpulse.served_tool_schemas_in (server_name, server_version, tool_name,
schema_sha256, input_schema, description, truncated, seen_at, event_uuid)`)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	const schema = `{"type":"object","properties":{"q":{"type":"string"}}}`
	for i, r := range []struct{ version, tool string }{{"1", "list_issues"}, {"2", "list_issues"}, {"2", "get_me"}} {
		if err := batch.Append("gh", r.version, r.tool, r.version+r.tool, schema, "", uint8(0), at.Add(time.Duration(i)*time.Hour), uuid.New()); err != nil {
			t.Fatal(err)
		}
	}
	if err := batch.Send(); err != nil {
		t.Fatal(err)
	}
	dsn := e.Stack.ClickHouseDSN
	for version, wantTools := range map[string]int{"": 2, "1": 1} {
		args := []string{"--from-traffic", "--server-name", "gh", "--clickhouse", dsn, "--name-rule", "mcp", "--format", "json"}
		if version != "" {
			args = append(args, "--server-version", version)
		}
		err, stdout, stderr := runSchemacheckCmd(t, args...)
		if err != nil {
			t.Fatalf("%q: %v %s", args, err, stderr)
		}
		var r struct {
			Tools        int `json:"tools"`
			NameFailures int `json:"name_failures"`
			PerTool      []struct {
				SchemaChars int  `json:"schema_chars"`
				Injected    bool `json:"injected"`
			} `json:"per_tool"`
		}
		if err := json.Unmarshal([]byte(stdout), &r); err != nil {
			t.Fatal(err)
		}
		if r.Tools != wantTools || r.NameFailures != 0 || r.PerTool[0].SchemaChars != len(schema) || r.PerTool[0].Injected {
			t.Errorf("version %q: %+v", version, r)
		}
	}
	err, stdout, _ := runSchemacheckCmd(t, "--from-traffic", "--server-name", "gh", "--clickhouse", dsn, "--name-rule", "mcp")
	if err != nil || !strings.Contains(stdout, `traffic of "gh" (latest version): version "2", seen 2026-11-30T09:00:00Z to 2026-11-30T10:00:00Z`) {
		t.Errorf("text report: %v\n%s", err, stdout)
	}
	err, _, stderr := runSchemacheckCmd(t, "--from-traffic", "--server-name", "nobody", "--clickhouse", dsn)
	if exitCode(err) != 2 || !strings.Contains(stderr, "no tools/list seen in traffic") {
		t.Errorf("a server never seen: exit %d, %s", exitCode(err), stderr)
	}
}

// The README's by-hand path: a saved tools file checked with --store lands in the rows the
// scheduler's ratchet job writes, so the Schema ratchet dashboard's panels show it (without
// --store nothing is stored). A file that breaks a ratchet shows on the dashboard but is not
// production: the ratchet-broken alert does not count it, while a stored traffic check
// (version kept) is counted.
func TestSchemacheckStoreShowsOnTheRatchetDashboard(t *testing.T) {
	e := testenv.New(t, testenv.Options{})
	ctx := context.Background()
	dsn := e.Stack.ClickHouseDSN
	corpus := filepath.Join("..", "..", "testdata", "mcp-tool-schemas", "posthog")
	since := time.Now().Add(-time.Minute)
	ds, err := dashboards.Load()
	if err != nil {
		t.Fatal(err)
	}
	panel := func(id string) dashboards.Panel {
		for _, d := range ds {
			for _, p := range d.Panels {
				if d.Name == "schema-ratchet" && p.ID == id {
					return p
				}
			}
		}
		t.Fatalf("no panel schema-ratchet/%s", id)
		return dashboards.Panel{}
	}
	// rowsOf runs a panel and keeps the rows of server, each as column name -> cell.
	rowsOf := func(id, server string) []map[string]any {
		t.Helper()
		res, err := dashboards.Run(ctx, e.ClickHouse, panel(id), dashboards.Filters{From: since})
		if err != nil {
			t.Fatal(err)
		}
		var rows []map[string]any
		for _, r := range res.Rows {
			row := map[string]any{}
			for i, c := range res.Columns {
				row[c.Name] = r[i]
			}
			if row["server"] == server {
				rows = append(rows, row)
			}
		}
		return rows
	}

	if err, _, stderr := runSchemacheckCmd(t, "--tools-file", corpus, "--server-name", "posthog-by-hand", "--clickhouse", dsn); err != nil {
		t.Fatalf("check: %v %s", err, stderr)
	}
	if rows := rowsOf("oversized-vs-ratchet", "posthog-by-hand"); len(rows) != 0 {
		t.Fatalf("a check without --store stored %v", rows)
	}

	err, stdout, stderr := runSchemacheckCmd(t, "--tools-file", corpus, "--server-name", "posthog-by-hand", "--store", "--clickhouse", dsn)
	if err != nil || !strings.Contains(stdout, "OK: every ratchet holds.") || !strings.Contains(stderr, `stored as run `) || !strings.Contains(stderr, `of server "posthog-by-hand" (source file)`) {
		t.Fatalf("check --store: %v\n%s\n%s", err, stdout, stderr)
	}
	oversized := rowsOf("oversized-vs-ratchet", "posthog-by-hand")
	if len(oversized) != 1 || oversized[0]["oversized"] != 2.0 || oversized[0]["max_oversized"] != 44.0 {
		t.Fatalf("oversized-vs-ratchet rows %v, want one run: 2 oversized of at most 44", oversized)
	}
	coverage := rowsOf("coverage-vs-minimum", "posthog-by-hand")
	if len(coverage) != 1 || coverage[0]["nested_description_coverage"] != 242.0/363 || coverage[0]["min_nested_coverage"] != 0.55 {
		t.Fatalf("coverage-vs-minimum rows %v, want one run: 242 of 363 against 0.55", coverage)
	}
	var offenders []any
	for _, r := range rowsOf("offending-tools", "posthog-by-hand") {
		offenders = append(offenders, r["tool_name"])
	}
	if len(offenders) == 0 || offenders[0] != "survey-create" && offenders[0] != "exec" {
		t.Fatalf("offending-tools of the stored run: %v, want the oversized survey-create and exec first", offenders)
	}

	// A breaking file check: stored and charted, exit 1, and not a production alert.
	err, _, stderr = runSchemacheckCmd(t, "--tools-file", corpus, "--server-name", "posthog-by-hand", "--store", "--clickhouse", dsn, "--max-oversized", "1")
	if exitCode(err) != 1 || !strings.Contains(stderr, "stored as run ") {
		t.Fatalf("a broken ratchet, stored: exit %d, %s", exitCode(err), stderr)
	}
	if rows := rowsOf("oversized-vs-ratchet", "posthog-by-hand"); len(rows) != 2 {
		t.Fatalf("oversized-vs-ratchet rows %v, want both runs", rows)
	}

	// A traffic check stored by hand keeps the version it checked and counts for the alert.
	batch, err := e.ClickHouse.PrepareBatch(ctx, `INSERT INTO mcpulse.served_tool_schemas_in (server_name, server_version, tool_name,
schema_sha256, input_schema, description, truncated, seen_at, event_uuid)`)
	if err != nil {
		t.Fatal(err)
	}
	const schema = `{"type":"object","properties":{"q":{"type":"string"}}}`
	if err := batch.Append("gh-by-hand", "3.1", "list_issues", "x", schema, "", uint8(0), time.Now().UTC(), uuid.New()); err != nil {
		t.Fatal(err)
	}
	if err := batch.Send(); err != nil {
		t.Fatal(err)
	}
	err, _, stderr = runSchemacheckCmd(t, "--from-traffic", "--server-name", "gh-by-hand", "--name-rule", "mcp", "--max-tools", "0", "--store", "--clickhouse", dsn)
	if err != nil || !strings.Contains(stderr, `of server "gh-by-hand" (source traffic)`) {
		t.Fatalf("traffic check --store: %v %s", err, stderr)
	}
	var source, version string
	var tools uint32
	if err := e.ClickHouse.QueryRow(ctx, "SELECT source, server_version, tools FROM mcpulse.schema_check_runs FINAL WHERE server = 'gh-by-hand'").Scan(&source, &version, &tools); err != nil {
		t.Fatal(err)
	}
	if source != "traffic" || version != "3.1" || tools != 1 {
		t.Fatalf("stored traffic run: source %q, version %q, %d tools", source, version, tools)
	}
	rows, err := e.ClickHouse.Query(ctx, sql.Query("alert_ratchet_broken"), since.UTC().Truncate(time.Second), time.Now().UTC().Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var alerting []string
	for rows.Next() {
		var server, violations string
		var broken float64
		var runs uint64
		if err := rows.Scan(&server, &broken, &runs, &violations); err != nil {
			t.Fatal(err)
		}
		alerting = append(alerting, server)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(alerting, "gh-by-hand") || slices.Contains(alerting, "posthog-by-hand") {
		t.Fatalf("servers the ratchet-broken alert watches: %v, want the traffic check and not the files", alerting)
	}

	// --store needs a name to store under and a ClickHouse to store in.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--tools-file", corpus, "--store", "--clickhouse", dsn}, "--store needs --server-name"},
		{[]string{"--tools-file", corpus, "--store", "--server-name", "x", "--clickhouse", ""}, "--store writes to ClickHouse"},
	} {
		err, _, stderr := runSchemacheckCmd(t, tc.args...)
		if exitCode(err) != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%q: exit %d, %s", tc.args, exitCode(err), stderr)
		}
	}
}

// A server checked by hand with --store also stores the tools it listed in
// served_tool_schemas, under the server's own serverInfo name and version (not --server-name),
// as the scheduled check does; a file check stores none.
func TestSchemacheckStoreServedSchemas(t *testing.T) {
	e := testenv.New(t, testenv.Options{})
	ctx := context.Background()
	dsn := e.Stack.ClickHouseDSN
	root := filepath.Join("..", "..", "testdata", "mcp-tool-schemas")
	served := func() uint64 {
		var n uint64
		if err := e.ClickHouse.QueryRow(ctx, "SELECT count() FROM mcpulse.v_served_tool_schemas WHERE server_name = 'mcptest-corpus' AND server_version = '1'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if err, _, stderr := runSchemacheckCmd(t, "--tools-file", filepath.Join(root, "sentry-mcp", "toolDefinitions.json"), "--server-name", "sentry-file",
		"--store", "--clickhouse", dsn, "--max-oversized", "100", "--min-nested-coverage", "0"); err != nil {
		t.Fatalf("file check --store: %v %s", err, stderr)
	}
	var all uint64
	if err := e.ClickHouse.QueryRow(ctx, "SELECT count() FROM mcpulse.v_served_tool_schemas").Scan(&all); err != nil || all != 0 {
		t.Fatalf("a file check stored %d served schemas (%v), want none", all, err)
	}

	tools, err := mcptest.LoadSet(root, "sentry")
	if err != nil {
		t.Fatal(err)
	}
	srv := mcptest.NewServer(tools, 0)
	web := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv.Server }, nil))
	defer web.Close()
	err, _, stderr := runSchemacheckCmd(t, "--server", web.URL+"/mcp", "--server-name", "sentry-by-hand", "--store", "--clickhouse", dsn,
		"--max-oversized", "100", "--min-nested-coverage", "0")
	if err != nil || !strings.Contains(stderr, fmt.Sprintf(`stored the %d tools served in served_tool_schemas under the server's serverInfo "mcptest-corpus" version "1"`, len(tools))) {
		t.Fatalf("server check --store: %v\n%s", err, stderr)
	}
	if n := served(); n != uint64(len(tools)) {
		t.Fatalf("%d served schemas stored under mcptest-corpus 1, want the %d listed", n, len(tools))
	}
}
