package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

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
