package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mcpulse/mcpulse/campaigns"
	"github.com/mcpulse/mcpulse/campaigns/campaignstest"
	"github.com/mcpulse/mcpulse/testkit/testenv"
)

func runLint(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(append([]string{"campaigns", "lint"}, args...))
	err := root.Execute()
	return out.String(), err
}

// The file and the API sources give the same report, and the exit status is 1 exactly when
// an error is found.
func TestCampaignsLintFileAndAPIAgree(t *testing.T) {
	const key = "phx_cli_test"
	t.Setenv(campaigns.EnvPersonalAPIKey, key)
	testdata := filepath.Join("..", "..", "campaigns", "testdata")
	for _, c := range []struct {
		file     string
		pagesDir string
		wantExit bool
	}{
		{filepath.Join(testdata, "valid_api.json"), filepath.Join(testdata, "api"), false},
		{filepath.Join(testdata, "rules", "exclusion_missing.json"), "", true},
		{filepath.Join(testdata, "rules", "immediate_invitation.json"), "", false},
	} {
		t.Run(filepath.Base(c.file), func(t *testing.T) {
			dir := c.pagesDir
			if dir == "" {
				// One page: the file itself, served by PostHog's API.
				dir = t.TempDir()
				for name, src := range map[string]string{"page1.json": c.file, "401.json": filepath.Join(testdata, "api", "401.json")} {
					data, err := os.ReadFile(src)
					if err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			srv := campaignstest.NewServer(t, dir, "2", key)
			fromFile, errFile := runLint(t, "--flags-file", c.file, "--exclusion-cohort", "641799", "--json")
			fromAPI, errAPI := runLint(t, "--project-id", "2", "--posthog-host", srv.URL, "--exclusion-cohort", "641799", "--json")
			if fromFile != fromAPI {
				t.Fatalf("file and API reports differ:\n%s\n%s", fromFile, fromAPI)
			}
			for _, err := range []error{errFile, errAPI} {
				var exit exitCodeError
				switch {
				case c.wantExit && (!errors.As(err, &exit) || exit.code != 1):
					t.Errorf("want exit status 1, got %v", err)
				case !c.wantExit && err != nil:
					t.Errorf("want success, got %v", err)
				}
			}
			if !strings.Contains(fromFile, `"will_recruit": true`) {
				t.Errorf("report:\n%s", fromFile)
			}
		})
	}
}

func TestCampaignsLintTextAndErrors(t *testing.T) {
	out, err := runLint(t, "--flags-file", filepath.Join("..", "..", "campaigns", "testdata", "rules", "booking_url_not_https.json"), "--exclusion-cohort", "641799")
	var exit exitCodeError
	if !errors.As(err, &exit) || exit.code != 1 {
		t.Fatalf("exit: %v", err)
	}
	for _, want := range []string{`campaign "data-teams": will NOT recruit`, "error booking_url_not_https:", "1 error(s), 0 warning(s)"} {
		if !strings.Contains(out, want) {
			t.Errorf("text output lacks %q:\n%s", want, out)
		}
	}
	t.Setenv(campaigns.EnvPersonalAPIKey, "")
	for _, args := range [][]string{
		{},
		{"--flags-file", "x.json", "--project-id", "2"},
		{"--project-id", "2", "--posthog-host", "http://127.0.0.1:1"},
		{"--flags-file", filepath.Join("..", "..", "campaigns", "testdata", "api", "401.json")},
	} {
		if _, err := runLint(t, args...); !errors.As(err, &exit) || exit.code != 2 {
			t.Errorf("%v: want exit status 2 (the lint did not run), got %v", args, err)
		}
	}
}

// Exit status 1 is only ever a lint that found an error; every way the flags (or the options)
// cannot be read is 2, with its reason on standard error, so a CI gate tells them apart.
func TestCampaignsLintExitStatus(t *testing.T) {
	const key = "phx_exit_test"
	testdata := filepath.Join("..", "..", "campaigns", "testdata")
	api := campaignstest.NewServer(t, filepath.Join(testdata, "api"), "2", key)
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		w.Write([]byte(`{"type": "server_error", "detail": "A server error occurred."}`))
	}))
	t.Cleanup(failing.Close)
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(release); slow.Close() })
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	dir := t.TempDir()
	nullCohort := filepath.Join(dir, "campaigns.yaml")
	if err := os.WriteFile(nullCohort, []byte("exclusion_cohort: ~\nposthog:\n  project_id: \"2\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	notPostHog := filepath.Join(dir, "flags.json")
	if err := os.WriteFile(notPostHog, []byte(`[{"key": "mcp-interview-recruitment"}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.json")
	for _, c := range []struct {
		name   string
		apiKey string
		args   []string
		code   int    // 0: success
		stderr string // what the message on standard error says (exit status 2)
	}{
		{"valid", "", []string{"--flags-file", filepath.Join(testdata, "valid_api.json"), "--exclusion-cohort", "641799"}, 0, ""},
		{"lint error", "", []string{"--flags-file", filepath.Join(testdata, "rules", "exclusion_missing.json"), "--exclusion-cohort", "641799"}, 1, ""},
		{"valid from the API", key, []string{"--project-id", "2", "--posthog-host", api.URL, "--exclusion-cohort", "641799"}, 0, ""},
		{"missing file", "", []string{"--flags-file", missing}, 2, missing + ": no such file"},
		{"not PostHog's JSON", "", []string{"--flags-file", notPostHog}, 2, "flag definitions are an array; want a JSON object"},
		{"401", "phx_wrong", []string{"--project-id", "2", "--posthog-host", api.URL}, 2, "answered 401 Unauthorized: Personal API key found in request Authorization header is invalid."},
		{"500", key, []string{"--project-id", "2", "--posthog-host", failing.URL}, 2, "PostHog feature-flags API on " + failing.URL + " answered 500 Internal Server Error: A server error occurred."},
		{"unreachable", key, []string{"--project-id", "2", "--posthog-host", down.URL}, 2, "PostHog feature-flags API on " + down.URL + " cannot be reached"},
		{"too slow", key, []string{"--project-id", "2", "--posthog-host", slow.URL, "--timeout", "300ms"}, 2, "PostHog feature-flags API on " + slow.URL + " did not answer within 300ms"},
		{"no key", "", []string{"--project-id", "2", "--posthog-host", api.URL}, 2, "no PostHog personal API key: set " + campaigns.EnvPersonalAPIKey},
		{"null cohort in the config", key, []string{"--config", nullCohort, "--posthog-host", api.URL}, 2, nullCohort + ": exclusion_cohort is empty (null)"},
		{"unknown option", "", []string{"--flags-file", missing, "--exclusion-cohrt", "1"}, 2, "unknown flag: --exclusion-cohrt"},
		{"bad timeout", key, []string{"--project-id", "2", "--timeout", "0s"}, 2, "--timeout must be positive"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv(campaigns.EnvPersonalAPIKey, c.apiKey)
			root := newRootCmd()
			var out, stderr bytes.Buffer
			root.SetOut(&out)
			root.SetErr(&stderr)
			root.SetArgs(append([]string{"campaigns", "lint"}, c.args...))
			err := root.Execute()
			var exit exitCodeError
			code := 0
			switch {
			case errors.As(err, &exit):
				code = exit.code
			case err != nil:
				t.Fatalf("error without an exit status: %v", err)
			}
			if code != c.code {
				t.Fatalf("exit status %d, want %d (%v)\nstdout: %s\nstderr: %s", code, c.code, err, out.String(), stderr.String())
			}
			if c.code == 2 {
				if !strings.HasPrefix(stderr.String(), "mcpulse campaigns lint: ") || !strings.Contains(stderr.String(), c.stderr) || out.Len() != 0 {
					t.Errorf("stderr %q, want it to say %q; stdout %q", stderr.String(), c.stderr, out.String())
				}
			} else if !strings.Contains(out.String(), "error(s)") {
				t.Errorf("no report: %q", out.String())
			}
		})
	}
}

// The JSON report shows a hostile variant key escaped and still decodes to it.
func TestCampaignsLintJSONEscapes(t *testing.T) {
	out, _ := runLint(t, "--flags-file", filepath.Join("..", "..", "campaigns", "testdata", "rules", "hostile_keys.json"), "--json")
	if strings.ContainsRune(out, '\u202e') || !strings.Contains(out, `agents\u202eq3\n`) {
		t.Fatalf("JSON output:\n%s", out)
	}
	var rep campaigns.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil || rep.Flags[0].Variants[0].CampaignID != "agents\u202eq3\n" {
		t.Fatalf("decode: %v %+v", err, rep)
	}
}

// --help names every problem code the lint can report.
func TestCampaignsLintHelpListsEveryCode(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "..", "campaigns", "lint.go"))
	if err != nil {
		t.Fatal(err)
	}
	codes := regexp.MustCompile(`(?m)^\tCode\w+ += "(\w+)"`).FindAllStringSubmatch(string(src), -1)
	if len(codes) < 20 {
		t.Fatalf("found %d codes in lint.go", len(codes))
	}
	cmd, _, err := newRootCmd().Find([]string{"campaigns", "lint"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range codes {
		if !regexp.MustCompile(`\b` + c[1] + `\b`).MatchString(cmd.Long) {
			t.Errorf("--help does not name %s", c[1])
		}
	}
}

// --config gives the cohort, the project and the key's variable; a flag given overrides it.
func TestCampaignsLintConfig(t *testing.T) {
	const key = "phx_from_config_env"
	t.Setenv("TEAM_POSTHOG_KEY", key)
	testdata := filepath.Join("..", "..", "campaigns", "testdata")
	srv := campaignstest.NewServer(t, filepath.Join(testdata, "api"), "2", key)
	cfg := filepath.Join(t.TempDir(), "campaigns.yaml")
	if err := os.WriteFile(cfg, []byte("exclusion_cohort: 641799\nposthog:\n  host: "+srv.URL+"\n  project_id: \"2\"\n  personal_api_key_env: TEAM_POSTHOG_KEY\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fromAPI, err := runLint(t, "--config", cfg, "--json")
	if err != nil {
		t.Fatal(err)
	}
	fromFile, err := runLint(t, "--flags-file", filepath.Join(testdata, "valid_api.json"), "--exclusion-cohort", "641799", "--json")
	if err != nil || fromAPI != fromFile {
		t.Fatalf("config run differs from the file run (%v):\n%s\n%s", err, fromAPI, fromFile)
	}
	// The file source with the config's cohort; an explicit cohort overrides it.
	if _, err := runLint(t, "--config", cfg, "--flags-file", filepath.Join(testdata, "valid_api.json")); err != nil {
		t.Fatalf("config cohort not used: %v", err)
	}
	out, err := runLint(t, "--config", cfg, "--flags-file", filepath.Join(testdata, "valid_api.json"), "--exclusion-cohort", "12")
	var exit exitCodeError
	if !errors.As(err, &exit) || !strings.Contains(out, "exclusion_missing") {
		t.Fatalf("explicit cohort not used: %v\n%s", err, out)
	}
}

// --store records the run in ClickHouse: a broken campaign still exits 1, and its run and
// payload versions are stored; a second run with a changed payload adds a version.
func TestCampaignsLintStore(t *testing.T) {
	e := testenv.New(t, testenv.Options{})
	dsn := e.Stack.ClickHouseDSN
	rules := filepath.Join("..", "..", "campaigns", "testdata")
	if _, err := runLint(t, "--flags-file", filepath.Join(rules, "valid_api.json"), "--exclusion-cohort", "641799", "--store"); err == nil || !strings.Contains(err.Error(), "--clickhouse") {
		t.Errorf("--store without a DSN: %v", err)
	}
	out, err := runLint(t, "--flags-file", filepath.Join(rules, "valid_api.json"), "--exclusion-cohort", "641799", "--store", "--clickhouse", dsn)
	if err != nil || !strings.Contains(out, "stored the run") {
		t.Fatalf("valid flags: %v\n%s", err, out)
	}
	time.Sleep(1100 * time.Millisecond) // runs are kept per second
	out, err = runLint(t, "--flags-file", filepath.Join(rules, "rules", "booking_url_not_https.json"), "--exclusion-cohort", "641799", "--store", "--clickhouse", dsn, "--retention", "48h")
	var exit exitCodeError
	if !errors.As(err, &exit) || exit.code != 1 || !strings.Contains(out, "stored the run") {
		t.Fatalf("broken flags: %v\n%s", err, out)
	}
	ctx := context.Background()
	var runs, broken uint64
	if err := e.ClickHouse.QueryRow(ctx, `SELECT uniqExact(run_at), countIf(variant = 'data-teams' AND will_recruit = 0 AND has(problem_codes, 'booking_url_not_https'))
FROM mcpulse.campaign_lint_runs`).Scan(&runs, &broken); err != nil {
		t.Fatal(err)
	}
	if runs != 2 || broken != 1 {
		t.Errorf("%d runs stored, %d with data-teams broken; want 2 and 1", runs, broken)
	}
	var versions uint64
	if err := e.ClickHouse.QueryRow(ctx, `SELECT count() FROM mcpulse.flag_payload_versions FINAL WHERE variant = 'data-teams'`).Scan(&versions); err != nil {
		t.Fatal(err)
	}
	if versions != 2 {
		t.Errorf("data-teams has %d payload versions, want 2 (its booking URL changed)", versions)
	}
}

// An unrelated flag of any shape never stops the lint; a checked flag that does not decode is
// one flag_malformed error, in JSON's words, and the other checked flag is still linted.
func TestCampaignsLintOddFlags(t *testing.T) {
	testdata := filepath.Join("..", "..", "campaigns", "testdata")
	out, err := runLint(t, "--flags-file", filepath.Join(testdata, "odd_unrelated_flags.json"), "--exclusion-cohort", "641799")
	if err != nil || !strings.Contains(out, `campaign "agents-q3": will recruit`) || !strings.Contains(out, "0 error(s), 0 warning(s)") {
		t.Fatalf("odd unrelated flags: %v\n%s", err, out)
	}
	root := newRootCmd()
	var buf bytes.Buffer
	root.SetOut(&buf)
	root.SetErr(&buf)
	root.SetIn(strings.NewReader(`{"results":[{"key":"x","filters":{"groups":[{"rollout_percentage":"100"}]}},` +
		`{"key":"mcp-intent-prompt","active":true,"filters":{"groups":[{"variant":5}]}}]}`))
	root.SetArgs([]string{"campaigns", "lint", "--flags-file", "-", "--json"})
	err = root.Execute()
	var exit exitCodeError
	if !errors.As(err, &exit) || exit.code != 1 {
		t.Fatalf("malformed checked flag: want exit status 1, got %v\n%s", err, buf.String())
	}
	var rep campaigns.Report
	if err := json.Unmarshal(buf.Bytes(), &rep); err != nil {
		t.Fatalf("%v\n%s", err, buf.String())
	}
	if len(rep.Flags) != 1 || rep.Flags[0].Problems[0].Code != campaigns.CodeFlagMalformed ||
		rep.Flags[0].Problems[0].Message != `the flag's definition is not PostHog's: "filters.groups.variant" is a number, want a string; nothing else of it was checked` {
		t.Fatalf("report %+v", rep)
	}
}

// An export without either checked flag lints nothing and says so plainly; it is no error.
func TestCampaignsLintNothingFound(t *testing.T) {
	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetIn(strings.NewReader(`{"count": 1, "next": null, "previous": null, "results": [{"id": 3001, "key": "new-onboarding", "active": true, "deleted": false, "filters": {"groups": [{"properties": [], "rollout_percentage": 100}]}}]}`))
	root.SetArgs([]string{"campaigns", "lint", "--flags-file", "-", "--exclusion-cohort", "641799"})
	if err := root.Execute(); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	want := "mcp-interview-recruitment: not found: the server skips recruitment\n" +
		"mcp-intent-prompt: not found: the SDK's default context description stays\n" +
		"nothing was linted: neither mcp-interview-recruitment nor mcp-intent-prompt is in the flag definitions (absent or deleted)\n" +
		"0 error(s), 0 warning(s)\n"
	if out.String() != want {
		t.Fatalf("output:\n%s\nwant:\n%s", out.String(), want)
	}
	// One of the two found: linted, no such line.
	out2, err := runLint(t, "--flags-file", filepath.Join("..", "..", "campaigns", "testdata", "rules", "exclusion_missing.json"), "--exclusion-cohort", "641799")
	if err == nil || strings.Contains(out2, "nothing was linted") || !strings.Contains(out2, "mcp-intent-prompt: not found") {
		t.Fatalf("%v\n%s", err, out2)
	}
}
