package jobs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/robfig/cron/v3"

	"github.com/mcpulse/mcpulse/demo/mcptest"
	"github.com/mcpulse/mcpulse/schemacheck"
	"github.com/mcpulse/mcpulse/testkit/testenv"
)

func countRuns(t *testing.T, e *testenv.Env, where string) uint64 {
	t.Helper()
	var n uint64
	if err := e.ClickHouse.QueryRow(context.Background(), "SELECT count() FROM mcpulse.schema_check_runs FINAL WHERE "+where).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A server that cannot be reached is a failed check with its error, never a run with zero
// tools; a hanging server ends at the timeout, and the next tick runs again.
func TestUnreachableAndHangingServersAreRecordedAsFailedChecks(t *testing.T) {
	e := testenv.New(t, testenv.Options{})
	hanging, err := net.Listen("tcp", "127.0.0.1:0") // accepts, never answers
	if err != nil {
		t.Fatal(err)
	}
	defer hanging.Close()
	go func() {
		for {
			c, err := hanging.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	closedAddr := closed.Addr().String()
	closed.Close()

	for _, tc := range []struct{ name, url string }{
		{"unreachable", "http://" + closedAddr + "/mcp"},
		{"hanging", "http://" + hanging.Addr().String() + "/mcp"},
	} {
		job := &SchemaRatchet{Server: schemacheck.ServerConfig{Name: tc.name, URL: tc.url}, ClickHouse: e.ClickHouse, Timeout: 2 * time.Second}
		start := time.Now()
		for tick := 0; tick < 2; tick++ {
			run, err := job.RunOnce(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if run.Err == nil || run.Report != nil {
				t.Errorf("%s: run %+v, want a failed check", tc.name, run)
			}
		}
		// Without the timeout a hanging server holds a run for ever; the bound is loose, for a
		// loaded machine, since the stored runs below are what the test is about.
		if took := time.Since(start); took > time.Minute {
			t.Errorf("%s: two runs took %s, want each bounded by the 2s timeout", tc.name, took)
		}
		if n := countRuns(t, e, "server = '"+tc.name+"' AND reached = 0 AND error != '' AND tools = 0"); n != 2 {
			t.Errorf("%s: %d failed runs stored, want 2", tc.name, n)
		}
	}
}

// Two scheduler replicas firing the same tick run the check once.
func TestEachScheduledRunHappensOnceAcrossReplicas(t *testing.T) {
	e := testenv.New(t, testenv.Options{})
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	url := "http://" + closed.Addr().String() + "/mcp"
	closed.Close()
	server := schemacheck.ServerConfig{Name: "replicated", URL: url}
	replicas := []*SchemaRatchet{
		{Server: server, ClickHouse: e.ClickHouse, Redis: e.Redis, Timeout: 2 * time.Second},
		{Server: server, ClickHouse: e.ClickHouse, Redis: e.Redis, Timeout: 2 * time.Second},
	}
	fire := func() {
		var wg sync.WaitGroup
		for _, r := range replicas {
			wg.Add(1)
			go func() { defer wg.Done(); r.scheduled(cron.Every(time.Hour))() }()
		}
		wg.Wait()
	}
	fire()
	if n := countRuns(t, e, "server = 'replicated'"); n != 1 {
		t.Fatalf("%d runs after one tick on two replicas, want 1", n)
	}
	fire() // the same period again: nothing
	if n := countRuns(t, e, "server = 'replicated'"); n != 1 {
		t.Fatalf("%d runs after a second tick in the same period, want 1", n)
	}
}

// A traffic server is checked from the snapshots of its latest version seen in traffic, the
// run says so (source, version) and each tool whether its snapshot was cut; a server never
// seen is a failed check.
func TestTrafficServerRun(t *testing.T) {
	e := testenv.New(t, testenv.Options{})
	ctx := context.Background()
	batch, err := e.ClickHouse.PrepareBatch(ctx, `INSERT INTO mcpulse.served_tool_schemas_in (server_name, server_version, tool_name,
schema_sha256, input_schema, description, truncated, seen_at, event_uuid)`)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 2, 10, 0, 0, 0, time.UTC)
	for _, r := range []struct {
		version, tool, schema string
		truncated             uint8
		after                 time.Duration
	}{
		{"1.0.0", "old_tool", `{"type":"object","properties":{}}`, 0, 0},
		{"1.1.0", "list_issues", `{"type":"object","properties":{"q":{"type":"object","properties":{"x":"[Object]"}}}}`, 1, time.Hour},
		{"1.1.0", "get_me", `{"type":"object","properties":{}}`, 0, time.Hour},
	} {
		if err := batch.Append("gh", r.version, r.tool, r.version+r.tool, r.schema, "", r.truncated, at.Add(r.after), uuid.New()); err != nil {
			t.Fatal(err)
		}
	}
	if err := batch.Send(); err != nil {
		t.Fatal(err)
	}
	job := &SchemaRatchet{Server: schemacheck.ServerConfig{Name: "gh-traffic", Traffic: &schemacheck.TrafficConfig{ServerName: "gh"},
		NameRule: new("mcp"), MaxOversized: new(0)}, ClickHouse: e.ClickHouse}
	run, err := job.RunOnce(ctx)
	if err != nil || run.Err != nil {
		t.Fatalf("run: %v / %v", err, run.Err)
	}
	if run.Source != "traffic" || run.ServerVersion != "1.1.0" || run.Report.Tools != 2 || run.Report.NameFailures != 0 || run.Report.TruncatedTools != 1 {
		t.Fatalf("run = %+v, report %+v", run, run.Report)
	}
	var source, version string
	var tools uint32
	if err := e.ClickHouse.QueryRow(ctx, "SELECT source, server_version, tools FROM mcpulse.schema_check_runs FINAL WHERE server = 'gh-traffic'").Scan(&source, &version, &tools); err != nil {
		t.Fatal(err)
	}
	if source != "traffic" || version != "1.1.0" || tools != 2 {
		t.Fatalf("stored run: %s %s %d", source, version, tools)
	}
	var truncated uint8
	if err := e.ClickHouse.QueryRow(ctx, "SELECT truncated FROM mcpulse.schema_check_tools FINAL WHERE server = 'gh-traffic' AND tool_name = 'list_issues'").Scan(&truncated); err != nil || truncated != 1 {
		t.Fatalf("stored tool: truncated %d, %v", truncated, err)
	}

	never := &SchemaRatchet{Server: schemacheck.ServerConfig{Name: "never-seen", Traffic: &schemacheck.TrafficConfig{ServerName: "never"}}, ClickHouse: e.ClickHouse}
	run, err = never.RunOnce(ctx)
	if err != nil || run.Err == nil || run.Report != nil {
		t.Fatalf("a server never seen: %+v, %v", run, err)
	}
	if n := countRuns(t, e, "server = 'never-seen' AND reached = 0 AND source = 'traffic' AND error LIKE '%no tools/list seen in traffic%'"); n != 1 {
		t.Fatalf("%d failed traffic runs stored, want 1", n)
	}
}

// A server whose token variable is unset is named at scheduler start-up (server, variable,
// setting), and each of its runs fails saying so, stored with that error, without a request to
// the server (no 401 to puzzle over); once the variable is set, the check runs with it.
func TestMissingTokenIsNamedAtStartupAndInEachRun(t *testing.T) {
	e := testenv.New(t, testenv.Options{})
	tools, err := mcptest.LoadSet(filepath.Join("..", "testdata", "mcp-tool-schemas"), "sentry")
	if err != nil {
		t.Fatal(err)
	}
	srv := mcptest.NewServer(tools, 0).Server
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	var requests atomic.Int64
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		if r.Header.Get("Authorization") != "Bearer t0k" || r.Header.Get("X-Api-Key") != "k3y" {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		handler.ServeHTTP(w, r)
	}))
	defer web.Close()
	server := schemacheck.ServerConfig{Name: "needs-token", URL: web.URL + "/mcp", AuthHeaderEnv: "MCPULSE_TEST_TOKEN",
		Headers: map[string]string{"X-Api-Key": "${MCPULSE_TEST_KEY}"}, Schedule: "@every 6h"}
	env := map[string]string{"MCPULSE_TEST_KEY": "k3y"}
	getenv := func(k string) string { return env[k] }
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))

	if _, err := NewScheduler(SchedulerConfig{Redis: e.Redis, ClickHouse: e.ClickHouse, Logger: logger, Getenv: getenv,
		SchemaServers: []schemacheck.ServerConfig{server}}); err != nil {
		t.Fatal(err)
	}
	startup := strings.TrimSpace(logs.String())
	if strings.Count(startup, "\n") != 0 || !strings.Contains(startup, "level=ERROR") || !strings.Contains(startup, "token variable not set") ||
		!strings.Contains(startup, "server=needs-token variable=MCPULSE_TEST_TOKEN setting=auth_header_env") {
		t.Fatalf("start-up log:\n%s\nwant one error line naming the server and MCPULSE_TEST_TOKEN", startup)
	}

	logs.Reset()
	job := &SchemaRatchet{Server: server, ClickHouse: e.ClickHouse, Getenv: getenv, Logger: logger, Timeout: 20 * time.Second}
	if err := job.checkAndLog(); err == nil || !strings.Contains(err.Error(), "$MCPULSE_TEST_TOKEN (auth_header_env) is not set") {
		t.Fatalf("run without the token: %v", err)
	}
	if line := logs.String(); !strings.Contains(line, "schema check not run: token variable not set") || !strings.Contains(line, "MCPULSE_TEST_TOKEN") {
		t.Fatalf("run log: %s", line)
	}
	if n := countRuns(t, e, "server = 'needs-token' AND reached = 0 AND tools = 0 AND error LIKE '%$MCPULSE_TEST_TOKEN (auth_header_env) is not set%'"); n != 1 {
		t.Fatalf("%d stored runs name the missing variable, want 1", n)
	}
	if n := requests.Load(); n != 0 {
		t.Fatalf("the server got %d requests without its token, want none", n)
	}

	env["MCPULSE_TEST_TOKEN"] = "t0k"
	run, err := job.RunOnce(context.Background())
	if err != nil || run.Err != nil || run.Report.Tools != len(tools) {
		t.Fatalf("run with the token: %v / %v, report %+v", err, run.Err, run.Report)
	}
}

// A url server's check also stores the tools it listed in served_tool_schemas, under the name
// and version the server gives itself in its initialize result (here the official Go SDK's
// serverInfo "mcptest-corpus" "1", not the configured name), each schema as served, its
// description, seen at the run's start (its seconds): the stored listing the consumer reads
// (served_tool_schemas_for_server.sql) for calls traced without schemas. With
// store_served_schemas: false nothing is stored; a traffic server's run stores nothing either.
func TestServerRunStoresServedSchemas(t *testing.T) {
	e := testenv.New(t, testenv.Options{})
	ctx := context.Background()
	tools, err := mcptest.LoadSet(filepath.Join("..", "testdata", "mcp-tool-schemas"), "sentry")
	if err != nil {
		t.Fatal(err)
	}
	srv := mcptest.NewServer(tools, 5) // paged: every page's tools are stored
	web := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv.Server }, nil))
	defer web.Close()
	stored := func() uint64 {
		var n uint64
		if err := e.ClickHouse.QueryRow(ctx, "SELECT count() FROM mcpulse.v_served_tool_schemas").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	started := time.Date(2026, 12, 1, 9, 30, 15, 0, time.UTC)
	server := schemacheck.ServerConfig{Name: "sentry-prod", URL: web.URL + "/mcp", StoreServedSchemas: new(false)}
	off := &SchemaRatchet{Server: server, ClickHouse: e.ClickHouse, Now: func() time.Time { return started }}
	if run, err := off.RunOnce(ctx); err != nil || run.Err != nil {
		t.Fatalf("run: %v / %v", err, run.Err)
	}
	if n := stored(); n != 0 {
		t.Fatalf("store_served_schemas: false stored %d served schemas", n)
	}

	server.StoreServedSchemas = nil // the default: on
	job := &SchemaRatchet{Server: server, ClickHouse: e.ClickHouse, Now: func() time.Time { return started }}
	run, err := job.RunOnce(ctx)
	if err != nil || run.Err != nil || run.Report.Tools != len(tools) {
		t.Fatalf("run: %v / %v, report %+v", err, run.Err, run.Report)
	}
	if srv.ListCalls() < 2 {
		t.Fatalf("%d tools/list pages served, want the listing paged", srv.ListCalls())
	}
	type row struct{ sha, schema, description, first, last string }
	got := map[string]row{}
	rows, err := e.ClickHouse.Query(ctx, `SELECT server_name, server_version, tool_name, schema_sha256, input_schema, description,
		toString(first_seen), toString(last_seen) FROM mcpulse.v_served_tool_schemas`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var name, version, tool string
		var r row
		if err := rows.Scan(&name, &version, &tool, &r.sha, &r.schema, &r.description, &r.first, &r.last); err != nil {
			t.Fatal(err)
		}
		if name != "mcptest-corpus" || version != "1" {
			t.Errorf("%s stored under server %q version %q, want the serverInfo's mcptest-corpus 1", tool, name, version)
		}
		got[tool] = r
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(tools) {
		t.Fatalf("%d tools stored, want the %d listed", len(got), len(tools))
	}
	for _, tool := range tools {
		raw, err := mcptest.Compact(tool.InputSchema) // the SDK serves the corpus file's JSON compacted
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(raw)
		want := row{hex.EncodeToString(sum[:]), string(raw), tool.Description, "2026-12-01 09:30:15", "2026-12-01 09:30:15"}
		if got[tool.Name] != want {
			t.Errorf("%s stored as %+v, want %+v", tool.Name, got[tool.Name], want)
		}
	}
	// The consumer's read of the stored listing finds them.
	snap, err := schemacheck.LoadFromTraffic(ctx, e.ClickHouse, schemacheck.TrafficSource{ServerName: "mcptest-corpus"})
	if err != nil || snap.ServerVersion != "1" || len(snap.Tools) != len(tools) {
		t.Fatalf("stored listing read back: version %q, %d tools, %v", snap.ServerVersion, len(snap.Tools), err)
	}

	// A traffic server's check stores nothing more: its tools were read from the table.
	traffic := &SchemaRatchet{Server: schemacheck.ServerConfig{Name: "corpus-traffic",
		Traffic: &schemacheck.TrafficConfig{ServerName: "mcptest-corpus"}}, ClickHouse: e.ClickHouse, Now: func() time.Time { return started.Add(time.Hour) }}
	if run, err := traffic.RunOnce(ctx); err != nil || run.Err != nil {
		t.Fatalf("traffic run: %v / %v", err, run.Err)
	}
	var last string
	if err := e.ClickHouse.QueryRow(ctx, "SELECT toString(max(last_seen)) FROM mcpulse.v_served_tool_schemas").Scan(&last); err != nil || last != "2026-12-01 09:30:15" {
		t.Fatalf("after a traffic run, last seen %s (%v): want the server run's time", last, err)
	}
}
