package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/mcpulse/mcpulse/consumers"
	"github.com/mcpulse/mcpulse/dashboards"
	"github.com/mcpulse/mcpulse/ingest"
	"github.com/mcpulse/mcpulse/ingest/gateway"
	"github.com/mcpulse/mcpulse/testkit/testenv"
)

// httpCall is one call of testdata/mcp/http-client.js's CALLS, with what mcpulse must derive.
type httpCall struct {
	Session       string          `json:"session"` // basic, beta (both on /mcp), stateless or dispatch
	Tool          string          `json:"tool"`
	Case          string          `json:"case"`
	Args          json.RawMessage `json:"args"`
	PerSession    bool            `json:"per_session_schema"`
	MinDurationMs float64         `json:"min_duration_ms"`
	Expect        struct {
		Source   string   `json:"source"`
		Keys     []string `json:"keys"`
		Reason   string   `json:"reason"`
		Error    string   `json:"error"`
		Unlisted bool     `json:"unlisted"`
	} `json:"expect"`
}

// httpOutcome is one call line of http-client.js's output.
type httpOutcome struct {
	Session  string   `json:"session"`
	Tool     string   `json:"tool"`
	Case     string   `json:"case"`
	Outcome  string   `json:"outcome"` // ok, tool_error, rpc_error
	Text     string   `json:"text"`
	Ms       float64  `json:"ms"` // as the client timed the call
	Relisted []string `json:"relisted"`
}

// The names http-server.js and http-client.js give themselves.
const (
	httpServerName      = "mcpulse-fixture-http"
	httpServerVersion   = "3.1.0"
	statelessServerName = "mcpulse-fixture-stateless"
	httpClientName      = "mcpulse-fixture-http-client"
)

// server is the server name and version a call's events carry: the wrapped server's, or none
// for the custom dispatcher (PostHogMCP has no field for them).
func (c httpCall) server() (string, string) {
	switch c.Session {
	case "dispatch":
		return "", ""
	case "stateless":
		return statelessServerName, "1.0.0"
	}
	return httpServerName, httpServerVersion
}

// runMCPHTTPClient runs testdata/mcp/http-client.js against the gateway at url and returns the
// call table and each call's outcome, checked against the table.
func runMCPHTTPClient(t testing.TB, url, apiKey string) ([]httpCall, []httpOutcome) {
	t.Helper()
	dir := npmCI(t, "mcp", "@posthog/mcp")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	printCalls := exec.CommandContext(ctx, "node", "http-client.js", "--print-calls")
	printCalls.Dir = dir
	list, err := printCalls.Output()
	if err != nil {
		t.Fatalf("node http-client.js --print-calls: %v", err)
	}
	var calls []httpCall
	if err := json.Unmarshal(list, &calls); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, "node", "http-client.js")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GATEWAY_URL="+url, "API_KEY="+apiKey)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node http-client.js: %v\n%s", err, stderr.String())
	}
	if s := stderr.String(); strings.Contains(s, "posthog error") || !strings.Contains(s, "http: posthog flushed") {
		t.Fatalf("the server did not flush its events cleanly:\n%s", s)
	}
	lines := bytes.Split(bytes.TrimSpace(out), []byte("\n"))
	var pages struct {
		Pages map[string]int `json:"pages"`
	}
	if err := json.Unmarshal(lines[len(lines)-1], &pages); err != nil {
		t.Fatalf("http-client.js's last line %q: %v", lines[len(lines)-1], err)
	}
	// Three pages each at the start and again after legacy_report's removal; one page on
	// /stateless and /dispatch.
	if want := map[string]int{"basic": 6, "beta": 6, "stateless": 1, "dispatch": 1}; !maps.Equal(pages.Pages, want) {
		t.Errorf("tools/list pages fetched per session: %v, want %v", pages.Pages, want)
	}
	var outcomes []httpOutcome
	for _, line := range lines[:len(lines)-1] {
		var o httpOutcome
		if err := json.Unmarshal(line, &o); err != nil {
			t.Fatalf("http-client.js output %q: %v", line, err)
		}
		outcomes = append(outcomes, o)
	}
	if len(outcomes) != len(calls) {
		t.Fatalf("%d outcomes for %d calls", len(outcomes), len(calls))
	}
	for i, c := range calls {
		o := outcomes[i]
		want := "ok"
		switch {
		case c.Expect.Error == "other":
			want = "tool_error"
		case c.Expect.Error != "":
			want = "rpc_error"
		}
		if o.Outcome != want {
			t.Errorf("%s %s (%s): outcome %s %q, want %s", c.Session, c.Tool, c.Case, o.Outcome, o.Text, want)
		}
		// The server's removal is what the session saw: it listed again without the tool.
		if relisted := o.Relisted != nil; relisted != (c.Tool == "legacy_report" && want == "ok") ||
			slices.Contains(o.Relisted, "legacy_report") {
			t.Errorf("%s %s (%s): listed again after the call: %v", c.Session, c.Tool, c.Case, o.Relisted)
		}
	}
	return calls, outcomes
}

// TestMCPStreamableHTTPEndToEnd runs a real MCP server over Streamable HTTP with stateful
// sessions (per-session tool sets, a paginated tools/list, a tool removed at runtime), wrapped
// by @posthog/mcp, and a custom dispatcher using @posthog/mcp's PostHogMCP API, both driven by
// the official MCP client, against the gateway; the consumer takes the events from Kafka into
// ClickHouse. Every call must come out as http-client.js's table says: its row, errors by kind,
// duration, ignored keys and their source (or "not measured" and why), and whether its session
// had the tool listed; then the exceptions, the served schemas, the rollup and the Tool
// diagnostics dashboard. The per-session server's calls are judged against the listing their own
// session saw last before the call: its pages accumulated, the list_changed re-list applied
// from its time on, the other session's listing never used.
func TestMCPStreamableHTTPEndToEnd(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	gw, err := gateway.New(gateway.Config{APIKeys: []string{testKey}, Brokers: env.Stack.KafkaBrokers}, env.Publisher)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw.Handler())
	defer srv.Close()
	calls, outcomes := runMCPHTTPClient(t, srv.URL, testKey)

	c, err := consumers.New(consumers.Config{
		Brokers: env.Stack.KafkaBrokers, Redis: env.Redis, ClickHouse: env.ClickHouse, DeadLetters: env.Publisher,
		BatchWait: 100 * time.Millisecond, IdleToDrain: 500 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.RunUntilDrained(ctx); err != nil {
		t.Fatal(err)
	}
	checkHTTPRows(t, env.ClickHouse, calls, outcomes)
}

// httpRow is a stored tool call of http-server.js.
type httpRow struct {
	Server, Version, Client, Session, Intent string
	IsError, UnknownTool                     uint8
	Keys, Counted                            []string
	Source, Reason, ErrorClass               string
	DurationMs                               *float64
}

// httpCalls selects the tool calls of http-server.js: the wrapped servers', and the
// dispatcher's (no server name, the SDK's source).
const httpCalls = `(server_name IN ('` + httpServerName + `', '` + statelessServerName + `') OR (server_name = '' AND source = '` + ingest.SDKSource + `'))`

func checkHTTPRows(t *testing.T, ch driver.Conn, calls []httpCall, outcomes []httpOutcome) {
	t.Helper()
	ctx := context.Background()
	rows, err := ch.Query(ctx, `SELECT server_name, server_version, client_name, session_id, intent, is_error, unknown_tool,
		ignored_keys, counted_ignored_keys, ignored_keys_source, ignored_keys_reason, error_class, duration_ms
		FROM mcpulse.tool_calls FINAL WHERE `+httpCalls)
	if err != nil {
		t.Fatal(err)
	}
	var stored []httpRow
	for rows.Next() {
		var r httpRow
		if err := rows.Scan(&r.Server, &r.Version, &r.Client, &r.Session, &r.Intent, &r.IsError, &r.UnknownTool,
			&r.Keys, &r.Counted, &r.Source, &r.Reason, &r.ErrorClass, &r.DurationMs); err != nil {
			t.Fatal(err)
		}
		stored = append(stored, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(stored) != len(calls) {
		t.Errorf("%d tool_calls rows for %d calls", len(stored), len(calls))
	}
	sessionIDs := map[string]map[string]bool{} // client session -> $session_id seen
	for i, c := range calls {
		name := fmt.Sprintf("%s %s (%s)", c.Session, c.Tool, c.Case)
		var row *httpRow
		for j := range stored {
			if strings.HasSuffix(stored[j].Intent, " Case "+c.Case+".") {
				row = &stored[j]
			}
		}
		if row == nil {
			t.Errorf("%s: no stored row", name)
			continue
		}
		if sessionIDs[c.Session] == nil {
			sessionIDs[c.Session] = map[string]bool{}
		}
		sessionIDs[c.Session][row.Session] = true
		server, version := c.server()
		client := httpClientName
		if c.Session == "dispatch" {
			client = "" // PostHogMCP.captureToolCall has no client name to give
		}
		if row.Server != server || row.Version != version || row.Client != client || row.Session == "" {
			t.Errorf("%s: server %q %q, client %q, session %q; want %q %q, %q, a session", name, row.Server, row.Version, row.Client, row.Session, server, version, client)
		}
		if row.ErrorClass != c.Expect.Error || (row.IsError == 1) != (c.Expect.Error != "") {
			t.Errorf("%s: is_error %d, error_class %q; want error %q", name, row.IsError, row.ErrorClass, c.Expect.Error)
		}
		if (row.UnknownTool == 1) != c.Expect.Unlisted {
			t.Errorf("%s: unknown_tool %d, want %v (the tool %s the listing its session saw last)", name, row.UnknownTool, c.Expect.Unlisted,
				map[bool]string{true: "absent from", false: "present in"}[c.Expect.Unlisted])
		}
		wantKeys, gotKeys := slices.Sorted(slices.Values(c.Expect.Keys)), slices.Sorted(slices.Values(row.Keys))
		if row.Source != c.Expect.Source || row.Reason != c.Expect.Reason {
			t.Errorf("%s: ignored keys from %q (reason %q), want from %q (reason %q)", name, row.Source, row.Reason, c.Expect.Source, c.Expect.Reason)
		}
		if !slices.Equal(gotKeys, wantKeys) || !slices.Equal(slices.Sorted(slices.Values(row.Counted)), wantKeys) {
			t.Errorf("%s: ignored keys %q (counted %q), want %q", name, gotKeys, row.Counted, wantKeys)
		}
		// The SDK times the call on the server: no shorter than the tool's own wait, no longer
		// than the client saw it take.
		switch d := row.DurationMs; {
		case d == nil:
			t.Errorf("%s: no duration", name)
		case *d < c.MinDurationMs || *d > outcomes[i].Ms+1:
			t.Errorf("%s: duration %v ms, want between %v and the %v ms the client measured", name, *d, c.MinDurationMs, outcomes[i].Ms)
		}
	}
	// One $session_id per client session, four apart.
	all := map[string]bool{}
	for s, ids := range sessionIDs {
		if len(ids) != 1 {
			t.Errorf("session %s: %d session ids on its calls, want 1", s, len(ids))
		}
		maps.Copy(all, ids)
	}
	if len(all) != 4 {
		t.Errorf("%d distinct session ids over the basic, beta, stateless and dispatch sessions, want 4", len(all))
	}

	// Each failed call's $exception, classed as its call.
	failed := map[string]int{}
	for _, c := range calls {
		if c.Expect.Error != "" {
			failed[c.Tool+" "+c.Expect.Error]++
		}
	}
	gotFailed := map[string]int{}
	erows, err := ch.Query(ctx, `SELECT tool_name, error_class, toUInt64(count()) FROM mcpulse.mcp_exceptions FINAL
		WHERE server_name IN (?, ?) OR (server_name = '' AND session_id IN (SELECT session_id FROM mcpulse.tool_calls FINAL WHERE `+httpCalls+`))
		GROUP BY tool_name, error_class`, httpServerName, statelessServerName)
	if err != nil {
		t.Fatal(err)
	}
	for erows.Next() {
		var tool, class string
		var n uint64
		if err := erows.Scan(&tool, &class, &n); err != nil {
			t.Fatal(err)
		}
		gotFailed[tool+" "+class] = int(n)
	}
	if !maps.Equal(gotFailed, failed) {
		t.Errorf("mcp_exceptions by tool and error class:\n got %v\nwant %v", gotFailed, failed)
	}

	// The served schemas: every tool of every page; beta_radar twice (one schema per plan); the
	// dispatcher's listing under no server name, with the context property the SDK injected.
	sch := map[string]string{}
	srows, err := ch.Query(ctx, `SELECT server_name, server_version, arrayStringConcat(arraySort(groupArray(tool_name)), ' '),
		toUInt64(countIf(position(input_schema, '"context"') = 0))
		FROM mcpulse.v_served_tool_schemas WHERE server_name IN (?, ?, '') AND has(?, tool_name)
		GROUP BY server_name, server_version`, httpServerName, statelessServerName, httpListedTools)
	if err != nil {
		t.Fatal(err)
	}
	for srows.Next() {
		var server, version, tools string
		var noContext uint64
		if err := srows.Scan(&server, &version, &tools, &noContext); err != nil {
			t.Fatal(err)
		}
		sch[server+" "+version] = fmt.Sprintf("%s (%d without context)", tools, noContext)
	}
	wantSch := map[string]string{
		httpServerName + " " + httpServerVersion: "beta_radar beta_radar get_forecast legacy_report list_alerts slow_export sync_stations (0 without context)",
		statelessServerName + " 1.0.0":           "beta_radar get_forecast legacy_report list_alerts slow_export sync_stations (0 without context)",
		" ":                                      "convert_units station_info (0 without context)",
	}
	if !maps.Equal(sch, wantSch) {
		t.Errorf("served schemas per server version:\n got %v\nwant %v", sch, wantSch)
	}
	checkHTTPRollups(t, ch, calls)
}

// httpListedTools are the tools http-server.js lists (either plan, before the removal) and its
// dispatcher lists.
var httpListedTools = []string{"get_forecast", "beta_radar", "list_alerts", "legacy_report", "slow_export", "sync_stations", "convert_units", "station_info"}

// checkHTTPRollups checks v_tool_call_stats_hourly per tool and server version, and the Tool
// diagnostics dashboard's tools panel, against what the calls imply.
func checkHTTPRollups(t *testing.T, ch driver.Conn, calls []httpCall) {
	t.Helper()
	want := map[string]toolCallStats{} // "tool server version"
	for _, c := range calls {
		server, version := c.server()
		k := strings.Join([]string{c.Tool, server, version}, " ")
		s := want[k]
		s.Calls++
		s.DurationCount++
		switch e := c.Expect.Error; {
		case e == "unknown_tool":
			s.Errors++
		case strings.HasPrefix(e, "validation_"):
			s.Errors++
			s.ValidationErrors++
		case e != "":
			s.Errors++
		default:
			s.Successful++
			switch c.Expect.Reason {
			case "":
				s.Measurable++
				s.KeysFromSchema++
				if len(c.Expect.Keys) > 0 {
					s.WithIgnoredKeys++
				}
			case "no_schema":
				s.NoSchema++
			}
		}
		if c.Expect.Unlisted || c.Expect.Error == "unknown_tool" {
			s.UnknownToolCalls++
		}
		want[k] = s
	}
	rows, err := ch.Query(context.Background(), `SELECT tool_name, server_name, server_version,
		calls, errors, successful_calls, measurable_calls, calls_with_ignored_keys,
		keys_reported, keys_from_response, keys_from_schema,
		not_measurable_no_schema, not_measurable_truncated, not_measurable_other,
		validation_errors, unknown_tool_calls, duration_count
		FROM mcpulse.v_tool_call_stats_hourly WHERE server_name IN (?, ?) OR (server_name = '' AND has(?, tool_name))`,
		httpServerName, statelessServerName, []string{"convert_units", "station_info", "delete_station"})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]toolCallStats{}
	for rows.Next() {
		var tool, server, version string
		var s toolCallStats
		dest := []any{&tool, &server, &version}
		for _, p := range s.fields() {
			dest = append(dest, p)
		}
		if err := rows.Scan(dest...); err != nil {
			t.Fatal(err)
		}
		k := strings.Join([]string{tool, server, version}, " ")
		sum := got[k]
		for i, p := range sum.fields() {
			*p += *s.fields()[i]
		}
		got[k] = sum
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for k, w := range want {
		g := got[k]
		if g != w {
			t.Errorf("v_tool_call_stats_hourly %s:\n got %+v\nwant %+v", k, g, w)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("v_tool_call_stats_hourly: unexpected cell %s %+v", k, got[k])
		}
	}

	// The dispatcher's tool on the Tool diagnostics dashboard: measured like any other.
	every := dashboards.Filters{MinCalls: 1, Limit: dashboards.MaxLimit}
	var shown string
	for _, row := range panelRows(runPanel(t, ch, "tool-diagnostics", "tools", every)) {
		if row["tool_name"] == "convert_units" {
			rate := "not measured"
			if r, ok := row["ignored_key_rate"].(float64); ok {
				rate = fmt.Sprintf("%.4f", r)
			}
			shown = fmt.Sprintf("calls %v, ignored-key rate %s, validation-error rate %.4f, unknown tools %v",
				row["calls"], rate, row["validation_error_rate"], row["unknown_tool_calls"])
		}
	}
	if w := "calls 3, ignored-key rate 0.5000, validation-error rate 0.3333, unknown tools 0"; shown != w {
		t.Errorf("Tool diagnostics, tools panel, convert_units (the custom dispatcher's):\n got %s\nwant %s", shown, w)
	}
}
