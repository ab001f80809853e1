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
