package consumers_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpulse/mcpulse/consumers"
	"github.com/mcpulse/mcpulse/consumers/chwrite"
	"github.com/mcpulse/mcpulse/ingest"
	"github.com/mcpulse/mcpulse/ingest/otlp"
	"github.com/mcpulse/mcpulse/misuse"
	mcsql "github.com/mcpulse/mcpulse/sql"
)

// objectSchema is an input schema declaring keys (strings), as a zod object serves it.
func objectSchema(keys ...string) map[string]any {
	props := map[string]any{}
	for _, k := range keys {
		props[k] = map[string]any{"type": "string"}
	}
	return map[string]any{"type": "object", "properties": props, "$schema": "http://json-schema.org/draft-07/schema#"}
}

// sdkListing is a $mcp_tools_list event as @posthog/mcp sends it: session ("" for none),
// the request's cursor (nil: a first page), the result's tools and nextCursor ("" for none).
func sdkListing(n int, distinctID, session, server string, at time.Time, cursor *string, next string, tools map[string][]string) []byte {
	var listed []string
	var served []any
	for _, name := range sortedKeys(tools) {
		listed = append(listed, name)
		served = append(served, map[string]any{"name": name, "description": name + " tool", "inputSchema": objectSchema(tools[name]...)})
	}
	params := map[string]any{}
	if cursor != nil {
		params["cursor"] = *cursor
	}
	result := map[string]any{"tools": served}
	if next != "" {
		result["nextCursor"] = next
	}
	props := map[string]any{
		"$mcp_server_name": server, "$mcp_server_version": "2.0.0", "$mcp_listed_tool_names": listed,
		"$mcp_parameters": map[string]any{"request": map[string]any{"method": "tools/list", "params": params}},
		"$mcp_response":   result,
	}
	if session != "" {
		props["$session_id"] = session
	}
	return envelope(uuidN(n), ingest.EventToolsList, distinctID, at, props)
}

// sdkCall is a successful $mcp_tool_call as @posthog/mcp sends it, with its arguments.
func sdkCall(n int, distinctID, session, server string, at time.Time, tool string, args map[string]any) []byte {
	props := map[string]any{
		"$mcp_tool_name": tool, "$mcp_is_error": false, "$mcp_server_name": server, "$mcp_server_version": "2.0.0",
		"$mcp_parameters": map[string]any{"request": map[string]any{"method": "tools/call", "params": map[string]any{"name": tool, "arguments": args}}},
		"$mcp_response":   map[string]any{"content": []any{map[string]any{"type": "text", "text": "ok"}}},
	}
	if session != "" {
		props["$session_id"] = session
	}
	return envelope(uuidN(n), ingest.EventToolCall, distinctID, at, props)
}

func sortedKeys(m map[string][]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

// Each call is judged against the listing its own session was served last before it, in
// event time: one batch holds a paginated listing, a re-list that drops a tool published
// before a call made earlier than it, two sessions served different schemas of one tool, and
// sessionless traffic re-listed at runtime. A new consumer group replaying the topic with an
// empty listing state judges every call the same.
func TestCallsAreJudgedByTheirSessionsListingInEventTime(t *testing.T) {
	h := newHarness(t)
	at := func(s int) time.Time { return base.Add(time.Duration(s) * time.Second) }
	p2 := "page-2"
	const srv, stateless = "radar-server", "radar-stateless"
	// Publish order = log order within each distinct id's partition.
	h.publish(ingest.TopicToolCalls,
		// The basic session: a listing in two pages, then calls.
		sdkListing(1, "agent-basic", "ses-basic", srv, at(1), nil, p2, map[string][]string{"search": {"q"}, "beta_radar": {"query"}}),
		sdkListing(2, "agent-basic", "ses-basic", srv, at(2), &p2, "", map[string][]string{"legacy_export": {"format"}}),
		sdkCall(3, "agent-basic", "ses-basic", srv, at(3), "search", map[string]any{"q": "storm", "limit": "5"}),
		// The re-list after list_changed (legacy_export removed) is in the log before a call
		// made earlier than it: that call was served the paginated listing.
		sdkListing(4, "agent-basic", "ses-basic", srv, at(6), nil, "", map[string][]string{"search": {"q"}, "beta_radar": {"query"}}),
		sdkCall(5, "agent-basic", "ses-basic", srv, at(4), "legacy_export", map[string]any{"format": "csv"}),
		sdkCall(6, "agent-basic", "ses-basic", srv, at(5), "beta_radar", map[string]any{"query": "storm", "depth": "3"}),
		sdkCall(7, "agent-basic", "ses-basic", srv, at(7), "legacy_export", map[string]any{"format": "csv"}),
		// The beta session is served a beta_radar that declares depth, and lists last.
		sdkListing(8, "agent-beta", "ses-beta", srv, at(8), nil, "", map[string][]string{"search": {"q"}, "beta_radar": {"query", "depth"}}),
		sdkCall(9, "agent-beta", "ses-beta", srv, at(9), "beta_radar", map[string]any{"query": "storm", "depth": "3"}),
		// A later call of the basic session is still judged by its own listing.
		sdkCall(10, "agent-basic", "ses-basic", srv, at(10), "beta_radar", map[string]any{"query": "hail", "depth": "1"}),
		// Sessionless: the server version's listings, by time.
		sdkListing(11, "agent-x", "", stateless, at(1), nil, "", map[string][]string{"a": {"x"}, "b": {"x"}}),
		sdkListing(12, "agent-x", "", stateless, at(20), nil, "", map[string][]string{"a": {"x"}}),
		sdkCall(13, "agent-x", "", stateless, at(5), "b", map[string]any{"x": "1", "y": "2"}),
		sdkCall(14, "agent-x", "", stateless, at(21), "b", map[string]any{"x": "1"}),
		// A session that listed nothing: the version's listing in effect.
		sdkCall(15, "agent-y", "ses-silent", stateless, at(22), "a", map[string]any{"x": "1", "z": "2"}),
	)
	type judged struct {
		unknown uint8
		keys    string
		source  string
	}
	want := map[int]judged{
		3:  {0, "limit", "schema"},
		5:  {0, "", "schema"},
		6:  {0, "depth", "schema"},
		7:  {1, "", "not_measurable"},
		9:  {0, "", "schema"},
		10: {0, "depth", "schema"},
		13: {0, "y", "schema"},
		14: {1, "", "not_measurable"},
		15: {0, "z", "schema"},
	}
	check := func(stage string) {
		t.Helper()
		rows, err := h.ch.Query(context.Background(), `SELECT toString(uuid), unknown_tool, arrayStringConcat(ignored_keys, ','), ignored_keys_source
			FROM mcpulse.tool_calls FINAL`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		got := map[string]judged{}
		for rows.Next() {
			var id string
			var j judged
			if err := rows.Scan(&id, &j.unknown, &j.keys, &j.source); err != nil {
				t.Fatal(err)
			}
			got[id] = j
		}
		if len(got) != len(want) {
			t.Errorf("%s: %d tool calls stored, want %d", stage, len(got), len(want))
		}
		for n, w := range want {
			if g, ok := got[uuidN(n)]; !ok || g != w {
				t.Errorf("%s: call %d: %+v (stored %v), want %+v", stage, n, g, ok, w)
			}
		}
	}
	reg := prometheus.NewRegistry()
	h.drain(h.consumer(func(cfg *consumers.Config) { cfg.Registerer = reg }))
	check("first run")
	for name, want := range map[string]float64{
		"mcpulse_misuse_sessions":        2, // ses-basic, ses-beta (ses-silent listed nothing)
		"mcpulse_misuse_server_versions": 2,
		// ses-basic's first page, both pages, its re-list; ses-beta's; the two sessionless.
		"mcpulse_misuse_listings":                6,
		"mcpulse_misuse_session_evictions_total": 0,
		// Each schema text a call needed, once: search's, the two beta_radar's,
		// legacy_export's, and the sessionless a's and b's (one text).
		"mcpulse_misuse_schema_compiles_total": 5,
	} {
		if got, ok := gathered(t, reg, name, nil); !ok || got != want {
			t.Errorf("%s = %v (present %v), want %v", name, got, ok, want)
		}
	}
	// Every schema is within the limits: each limit's series is there, at zero.
	for _, limit := range misuse.Limits {
		if got, ok := gathered(t, reg, "mcpulse_misuse_schemas_over_limit_total", map[string]string{"limit": string(limit)}); !ok || got != 0 {
			t.Errorf("mcpulse_misuse_schemas_over_limit_total{limit=%q} = %v (present %v), want 0", limit, got, ok)
		}
	}
	// Another group reads the same log with nothing in memory: the same judgements.
	if err := h.ch.Exec(context.Background(), "TRUNCATE TABLE mcpulse.tool_calls"); err != nil {
		t.Fatal(err)
	}
	h.drain(h.consumer(func(cfg *consumers.Config) { cfg.GroupID = "replay" }))
	check("replay")
}

// A member that restarts (or takes a partition over) knows the listings of the offsets before
// the committed one, read back with its dedup window: a call after the restart is judged by
// its own session's listing, not by the server version's stored one (here another session's
// schema, listed later).
func TestListingsSurviveARestart(t *testing.T) {
	h := newHarness(t)
	if h.count("SELECT count() FROM system.tables WHERE database = 'mcpulse' AND name = 'served_tool_schemas_in'") == 0 {
		t.Skip("served_tool_schemas_in (the schema workstream's migration) is not there yet")
	}
	at := func(s int) time.Time { return base.Add(time.Duration(s) * time.Second) }
	const srv = "radar-server"
	h.publish(ingest.TopicToolCalls,
		sdkListing(1, "agent-basic", "ses-basic", srv, at(1), nil, "", map[string][]string{"beta_radar": {"query"}}),
		sdkListing(2, "agent-beta", "ses-beta", srv, at(2), nil, "", map[string][]string{"beta_radar": {"query", "depth"}}),
	)
	first := h.consumer(nil)
	h.drain(first)
	first.Close()
	h.publish(ingest.TopicToolCalls,
		sdkCall(3, "agent-basic", "ses-basic", srv, at(3), "beta_radar", map[string]any{"query": "storm", "depth": "3"}),
		sdkCall(4, "agent-beta", "ses-beta", srv, at(4), "beta_radar", map[string]any{"query": "storm", "depth": "3"}),
	)
	h.drain(h.consumer(nil)) // the same group, a new member: empty memory
	for n, want := range map[int]string{3: "depth", 4: ""} {
		var keys string
		if err := h.ch.QueryRow(context.Background(), "SELECT arrayStringConcat(ignored_keys, ',') FROM mcpulse.tool_calls FINAL WHERE uuid = ?", uuidN(n)).Scan(&keys); err != nil {
			t.Fatal(err)
		}
		if keys != want {
			t.Errorf("call %d after the restart: ignored %q, want %q", n, keys, want)
		}
	}
}

// storedQueries wraps the consumer's ClickHouse connection and counts its reads of a server
// version's stored listing (sql/queries/served_tool_schemas_for_server.sql).
type storedQueries struct {
	driver.Conn
	n atomic.Int64
}

func (s *storedQueries) Query(ctx context.Context, query string, args ...any) (driver.Rows, error) {
	if query == mcsql.Query("served_tool_schemas_for_server") {
		s.n.Add(1)
	}
	return s.Conn.Query(ctx, query, args...)
}

// A client traced by @traceloop/instrumentation-mcp (the recorded export of the real 0.27):
// its tools/list span names the tools without schemas, its calls carry the raw arguments. The
// schemas the server version serves are in served_tool_schemas (as the scheduled schema
// check's fetch stores them): each call listed by the span is judged against the stored
// schema, its ignored keys derived from the schema; a call to a tool the span's complete
// listing lacks is unknown. The stored listing is read once.
func TestNamesOnlyListingTakesTheStoredSchemas(t *testing.T) {
	h := newHarness(t)
	if h.count("SELECT count() FROM system.tables WHERE database = 'mcpulse' AND name = 'served_tool_schemas_in'") == 0 {
		t.Skip("served_tool_schemas_in (the schema workstream's migration) is not there yet")
	}
	data, err := os.ReadFile(filepath.Join("..", "ingest", "otlp", "testdata", "exports", "traceloop-client.json"))
	if err != nil {
		t.Fatal(err)
	}
	req, err := otlp.Decode(otlp.JSON, data, 0)
	if err != nil {
		t.Fatal(err)
	}
	mapped := otlp.Map(req)
	var listed []string
	for _, raw := range mapped.Events {
		ev, err := ingest.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		if ev.ToolsList != nil {
			if len(ev.ToolsList.Tools) != 0 || ev.ToolsList.ServerName != "otel-fixture-server" || ev.ToolsList.ServerVersion != "3.0.0" {
				t.Fatalf("the span's listing: %+v, want otel-fixture-server 3.0.0's tools named without schemas", ev.ToolsList)
			}
			listed = ev.ToolsList.ListedToolNames
		}
	}
	if !slices.Equal(listed, []string{"lookup", "explode"}) {
		t.Fatalf("listed %v", listed)
	}
	served := func(tool, schema string) ingest.ServedSchemaRow {
		sum := sha256.Sum256([]byte(schema))
		return ingest.ServedSchemaRow{ServerName: "otel-fixture-server", ServerVersion: "3.0.0", ToolName: tool,
			SchemaSHA256: hex.EncodeToString(sum[:]), InputSchema: schema, SeenAt: base}
	}
	in, err := chwrite.NewTable[ingest.ServedSchemaRow]("mcpulse.served_tool_schemas_in")
	if err != nil {
		t.Fatal(err)
	}
	if err := in.Insert(context.Background(), h.ch, []ingest.ServedSchemaRow{
		served("lookup", `{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`),
		served("explode", `{"type":"object","properties":{}}`),
	}); err != nil {
		t.Fatal(err)
	}
	var values [][]byte
	for _, raw := range mapped.Events {
		values = append(values, raw)
	}
	h.publish(ingest.TopicToolCalls, values...)
	reads := &storedQueries{Conn: h.ch}
	h.drain(h.consumer(func(cfg *consumers.Config) { cfg.ClickHouse = reads }))

	type derived struct {
		tool, source, reason, keys string
		unknown                    uint8
	}
	rows, err := h.ch.Query(context.Background(), `SELECT tool_name, ignored_keys_source, ignored_keys_reason,
		arrayStringConcat(ignored_keys, ',') AS keys, unknown_tool FROM mcpulse.tool_calls FINAL ORDER BY tool_name, keys`)
	if err != nil {
		t.Fatal(err)
	}
	var got []derived
	for rows.Next() {
		var d derived
		if err := rows.Scan(&d.tool, &d.source, &d.reason, &d.keys, &d.unknown); err != nil {
			t.Fatal(err)
		}
		got = append(got, d)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	want := []derived{
		{"explode", "schema", "", "", 0}, // {}
		{"ghost", "not_measurable", "no_schema", "", 1},
		{"lookup", "schema", "", "", 0},        // {"city":"Oslo"}
		{"lookup", "schema", "", "", 0},        // {"city":5}: refused by validation
		{"lookup", "schema", "", "country", 0}, // {"city":"Bergen","country":"NO"}
	}
	if !slices.Equal(got, want) {
		t.Errorf("derived per call, by tool and keys:\n got %+v\nwant %+v", got, want)
	}
	if n := reads.n.Load(); n != 1 {
		t.Errorf("the stored listing of otel-fixture-server 3.0.0 was read %d times, want once", n)
	}
}

// A listed schema past a limit (1,500 properties in one object: the default allows 1,000) is
// never compiled: its calls are stored as not measured with reason schema_over_limit and
// counted in the rollup's not_measurable_other, the schema is counted once in
// mcpulse_misuse_schemas_over_limit_total{limit="properties"}, and a neighbour tool of the
// same listing is measured as before.
func TestSchemaOverLimitIsNotMeasured(t *testing.T) {
	h := newHarness(t)
	at := func(s int) time.Time { return base.Add(time.Duration(s) * time.Second) }
	wide := make([]string, 1500)
	for i := range wide {
		wide[i] = "k" + strconv.Itoa(i)
	}
	const srv = "wide-server"
	h.publish(ingest.TopicToolCalls,
		sdkListing(1, "agent-w", "ses-w", srv, at(1), nil, "", map[string][]string{"wide": wide, "fine": {"q"}}),
		sdkCall(2, "agent-w", "ses-w", srv, at(2), "wide", map[string]any{wide[0]: "x", "extra": "1"}),
		sdkCall(3, "agent-w", "ses-w", srv, at(3), "wide", map[string]any{"extra": "2"}),
		sdkCall(4, "agent-w", "ses-w", srv, at(4), "fine", map[string]any{"q": "x", "extra": "3"}),
	)
	reg := prometheus.NewRegistry()
	h.drain(h.consumer(func(cfg *consumers.Config) { cfg.Registerer = reg }))

	rows, err := h.ch.Query(context.Background(), `SELECT tool_name, ignored_keys_source, ignored_keys_reason, arrayStringConcat(ignored_keys, ',')
		FROM mcpulse.tool_calls FINAL ORDER BY uuid`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var tool, source, reason, keys string
		if err := rows.Scan(&tool, &source, &reason, &keys); err != nil {
			t.Fatal(err)
		}
		got = append(got, tool+" "+source+" "+reason+" "+keys)
	}
	want := []string{"wide not_measurable schema_over_limit ", "wide not_measurable schema_over_limit ", "fine schema  extra"}
	if len(got) != len(want) {
		t.Fatalf("stored %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("call %d: %q, want %q", i+2, got[i], want[i])
		}
	}
	if n := h.count("SELECT sum(not_measurable_other) FROM mcpulse.v_tool_call_stats_hourly WHERE tool_name = 'wide'"); n != 2 {
		t.Errorf("not_measurable_other of wide = %d, want 2", n)
	}
	if v, ok := gathered(t, reg, "mcpulse_misuse_schemas_over_limit_total", map[string]string{"limit": "properties"}); !ok || v != 1 {
		t.Errorf(`mcpulse_misuse_schemas_over_limit_total{limit="properties"} = %v (present %v), want 1`, v, ok)
	}
}
