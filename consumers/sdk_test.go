package consumers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/mcpulse/mcpulse/consumers"
	"github.com/mcpulse/mcpulse/consumers/chwrite"
	"github.com/mcpulse/mcpulse/ingest"
)

// recordedSDKEvent returns one event the real @posthog/mcp 0.16.3 sent (the gateway's
// recordings in ingest/gateway/testdata/sdk).
func recordedSDKEvent(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "ingest", "gateway", "testdata", "sdk", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// sdkShapedEvent returns one event of ingest/testdata/sdk (shaped from the SDK's source).
func sdkShapedEvent(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "ingest", "testdata", "sdk", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// Every kind the MCP analytics SDK sends is stored, and an event of any other name is counted:
// nothing is dead-lettered or dropped. Replaying the topic changes nothing.
func TestSDKEventsAreStoredAndOtherNamesCounted(t *testing.T) {
	h := newHarness(t)
	var values [][]byte
	for _, name := range []string{"initialize", "tools_list_zod", "tool_call_ok", "tool_call_wrong_type", "exception_wrong_type"} {
		values = append(values, recordedSDKEvent(t, name))
	}
	// Shaped from the SDK's source, then recorded from the real SDK (record/record.js).
	for _, name := range []string{"feedback", "missing_capability", "resources_list", "resource_read_error", "prompts_list", "prompt_get", "identify",
		"recorded_feedback", "recorded_missing_capability", "recorded_resources_list", "recorded_resource_read", "recorded_resource_read_error", "recorded_identify"} {
		values = append(values, sdkShapedEvent(t, name))
	}
	values = append(values,
		envelope(uuidN(1), "$identify", "ses_1", base, map[string]any{"$set": map[string]any{"email": "a@example.com"}}),
		envelope(uuidN(2), "$mcp_resource_read", "ses_1", base, map[string]any{"$mcp_resource_name": "file:///x"}),
		envelope(uuidN(3), "$pageview", "ses_2", base, map[string]any{}),
		envelope(uuidN(4), "$mcp_custom", "ses_2", base, map[string]any{"x": 1}),
	)
	h.publish(ingest.TopicToolCalls, values...)
	c := h.consumer(nil)
	h.drain(c)
	h.drain(h.consumer(func(cfg *consumers.Config) { cfg.GroupID = "replay" }))

	for query, want := range map[string]int64{
		"SELECT count() FROM mcpulse.tool_calls FINAL": 2,
		"SELECT count() FROM mcpulse.tool_calls FINAL WHERE server_name = 'mcpulse-fixture-zod' AND source = 'posthog_mcp_analytics'":                                         2,
		"SELECT count() FROM mcpulse.tool_calls FINAL WHERE error_class = 'validation_type' AND is_error = 1":                                                                 1,
		"SELECT count() FROM mcpulse.tool_calls FINAL WHERE intent_source = 'context_parameter' AND protocol_version != ''":                                                   2,
		"SELECT count() FROM mcpulse.tool_calls FINAL WHERE position(properties, '$mcp_server_name') > 0":                                                                     0,
		"SELECT count() FROM mcpulse.mcp_initialize_events FINAL WHERE client_name = 'mcpulse-fixture-client' AND server_capabilities = '{\"tools\":{\"listChanged\":true}}'": 1,
		"SELECT count() FROM mcpulse.mcp_exceptions FINAL WHERE tool_name = 'get-sum' AND error_class = 'validation_type'":                                                    1,
		"SELECT count() FROM mcpulse.mcp_feedback FINAL":                                                                                                                      4,
		"SELECT count() FROM mcpulse.mcp_feedback FINAL WHERE kind = 'feedback' AND feedback_type = 'issue' AND summary LIKE 'query-trends rejects%' AND task_completed = 1 AND sentiment = 'negative' AND feedback_tool = 'query-trends' AND tool_name = 'send_feedback' AND position(details, '[redacted]') > 0 AND position(properties, '$mcp_feedback_team') > 0": 1,
		"SELECT count() FROM mcpulse.mcp_feedback FINAL WHERE kind = 'missing_capability' AND tool_name = 'get_more_tools' AND intent LIKE 'Needs a tool to delete several cohorts%' AND task_completed IS NULL AND session_id = 'mcp-session-7f3c9a1e' AND client_name = 'claude-code' AND server_version = '2.14.0'":                                                1,
		"SELECT count() FROM mcpulse.mcp_resource_prompt_events FINAL": 8,
		"SELECT count() FROM mcpulse.mcp_resource_prompt_events FINAL WHERE kind = 'resource_read' AND is_error = 1 AND name = 'posthog://projects/1/schema' AND error_message LIKE '%Resource not found%' AND listed_count IS NULL": 1,
		"SELECT count() FROM mcpulse.mcp_resource_prompt_events FINAL WHERE kind = 'resource_read' AND is_error = 0 AND name = 'file:///x' AND distinct_id = 'ses_1'":                                                                1,
		"SELECT count() FROM mcpulse.mcp_resource_prompt_events FINAL WHERE kind = 'resources_list' AND method = 'resources/list' AND listed_count = 2":                                                                              1,
		"SELECT count() FROM mcpulse.mcp_resource_prompt_events FINAL WHERE kind = 'prompts_list' AND listed_count = 1":                                                                                                              1,
		"SELECT count() FROM mcpulse.mcp_resource_prompt_events FINAL WHERE kind = 'prompt_get' AND name = 'weekly-report' AND protocol_version = '2025-06-18'":                                                                      1,
		"SELECT count() FROM mcpulse.mcp_identify_events FINAL": 3,
		"SELECT count() FROM mcpulse.mcp_identify_events FINAL WHERE distinct_id = 'user_2f9c' AND set_properties LIKE '%\"plan\":\"team\"%' AND set_once_properties != '' AND position(properties, '[redacted]') > 0":                         1,
		"SELECT count() FROM mcpulse.mcp_resource_prompt_events FINAL WHERE kind = 'resource_read' AND is_error = 1 AND name = 'posthog://insights/42' AND error_message = 'Insight 42 not found' AND server_name = 'mcpulse-fixture-reports'": 1,
		"SELECT count() FROM mcpulse.mcp_feedback FINAL WHERE kind = 'missing_capability' AND distinct_id = 'user_2f9c' AND intent LIKE 'Needs a tool%' AND client_name = 'mcpulse-fixture-client'":                                            1,
		"SELECT count() FROM mcpulse.mcp_identify_events FINAL WHERE distinct_id = 'ses_1' AND set_properties = '{\"email\":\"a@example.com\"}'":                                                                                               1,
		"SELECT count() FROM mcpulse.other_events FINAL":                                                                     2,
		"SELECT count() FROM mcpulse.other_events FINAL WHERE event IN ('$identify', '$mcp_resource_read', '$mcp_feedback')": 0,
		// Every stored event is counted per name.
		"SELECT sum(events) FROM mcpulse.v_events_by_name_hourly WHERE event IN ('$mcp_feedback', '$mcp_missing_capability', '$mcp_resources_list', '$mcp_resource_read', '$mcp_prompts_list', '$mcp_prompt_get', '$identify')": 15,
		"SELECT count() FROM mcpulse.dead_letters FINAL": 0,
	} {
		if got := h.count(query); got != want {
			t.Errorf("%s = %d, want %d", query, got, want)
		}
	}
	if s := c.Stats(); s.Stored["tools_list"] != 1 || s.Stored["other"] != 2 || s.Stored["initialize"] != 1 || s.Stored["exception"] != 1 ||
		s.Stored["feedback"] != 2 || s.Stored["missing_capability"] != 2 || s.Stored["resource_read"] != 4 || s.Stored["identify"] != 3 ||
		s.Stored["prompt_get"] != 1 || s.DeadLettered != 0 {
		t.Errorf("stats %+v", s)
	}

	// The served schemas land in the schema workstream's table when it exists; until its
	// migration does, they are left out and counted, never a stalled partition.
	if h.count("SELECT count() FROM system.tables WHERE database = 'mcpulse' AND name = 'served_tool_schemas_in'") == 0 {
		if got := c.Stats().RowsLeftOut; got != 5 {
			t.Errorf("rows left out = %d, want the 5 tools listed", got)
		}
		return
	}
	if got := h.count("SELECT count() FROM mcpulse.v_served_tool_schemas WHERE server_name = 'mcpulse-fixture-zod' AND server_version = '1.4.0'"); got != 5 {
		t.Errorf("served schemas = %d, want the 5 tools listed", got)
	}
}

// Tool calls of the MCP analytics SDK, which reports no ignored keys, get them derived: from the
// tool's result, else from the arguments against the schema the server version listed (in the
// batch, or read back from ClickHouse by a consumer that has not seen the listing); a call to a
// tool the version does not list is marked. A misused call keeps its captured request in
// properties, no call keeps its captured result. Expectations from the recording's client
// (ingest/gateway/testdata/mcp/client.js).
func TestSDKToolCallsGetDerivedIgnoredKeys(t *testing.T) {
	h := newHarness(t)
	if h.count("SELECT count() FROM system.tables WHERE database = 'mcpulse' AND name = 'served_tool_schemas_in'") == 0 {
		t.Skip("served_tool_schemas_in (the schema workstream's migration) is not there yet")
	}
	// The listing first, as a session lists before it calls (the recorded sessions' distinct
	// ids differ, so their events may sit on different partitions).
	h.publish(ingest.TopicToolCalls, recordedSDKEvent(t, "tools_list_zod"))
	c := h.consumer(nil)
	h.drain(c)
	var values [][]byte
	for _, name := range []string{"tool_call_ok", "tool_call_misnamed_top_level", "tool_call_nested_zod",
		"tool_call_unknown_tool_zod", "tool_call_notice_ignored_keys", "tool_call_wrong_type"} {
		values = append(values, recordedSDKEvent(t, name))
	}
	h.publish(ingest.TopicToolCalls, values...)
	h.drain(c)
	c.Close()

	// A new member with an empty cache: the listing comes back from ClickHouse.
	var env map[string]any
	if err := json.Unmarshal(recordedSDKEvent(t, "tool_call_misnamed_top_level"), &env); err != nil {
		t.Fatal(err)
	}
	env["uuid"] = uuidN(500)
	again, _ := json.Marshal(env)
	h.publish(ingest.TopicToolCalls, again)
	h.drain(h.consumer(nil))

	type derived struct {
		source, reason, keys, counted, class string
		unknown                              uint8
		params                               bool // properties keep $mcp_parameters
	}
	got := map[string]derived{}
	rows, err := h.ch.Query(context.Background(), `SELECT toString(uuid), raw_tool_name, ignored_keys_source, ignored_keys_reason,
		arrayStringConcat(ignored_keys, ','), arrayStringConcat(counted_ignored_keys, ','), error_class, unknown_tool,
		position(properties, '"$mcp_parameters":{"request":') > 0, position(properties, '$mcp_response') > 0
		FROM mcpulse.tool_calls FINAL`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id, tool string
		var d derived
		var response bool
		if err := rows.Scan(&id, &tool, &d.source, &d.reason, &d.keys, &d.counted, &d.class, &d.unknown, &d.params, &response); err != nil {
			t.Fatal(err)
		}
		if response {
			t.Errorf("%s (%s): properties keep $mcp_response", id, tool)
		}
		got[id] = d
	}
	uuidOf := func(name string) string {
		var e struct{ UUID string }
		if err := json.Unmarshal(recordedSDKEvent(t, name), &e); err != nil {
			t.Fatal(err)
		}
		return e.UUID
	}
	for name, want := range map[string]derived{
		"tool_call_ok":                  {source: "schema"},
		"tool_call_misnamed_top_level":  {source: "schema", keys: "c", counted: "c", params: true},
		"tool_call_nested_zod":          {source: "schema", keys: "customer.mail,items.1.qty,note", counted: "customer.mail,items.1.qty,note", params: true},
		"tool_call_unknown_tool_zod":    {source: "not_measurable", reason: "no_schema", class: "unknown_tool", unknown: 1, params: true},
		"tool_call_notice_ignored_keys": {source: "response", keys: "maxWords", counted: "maxWords", params: true},
		"tool_call_wrong_type":          {source: "schema", class: "validation_type", params: true},
	} {
		if g := got[uuidOf(name)]; g != want {
			t.Errorf("%s: %+v, want %+v", name, g, want)
		}
	}
	if g := got[uuidN(500)]; g != (derived{source: "schema", keys: "c", counted: "c", params: true}) {
		t.Errorf("a call whose listing was read back from ClickHouse: %+v", g)
	}
}

// The SDK's custom-dispatcher API (PostHogMCP) sends no server name, on its listings and its
// calls alike, and its calls' $mcp_parameters are the arguments themselves: the calls are judged
// against the listing without a server name, from the stream and read back from ClickHouse. A
// call without a server name from anything but the SDK is not judged against that listing.
func TestDispatcherCallsAreJudgedAgainstTheirListing(t *testing.T) {
	h := newHarness(t)
	if h.count("SELECT count() FROM system.tables WHERE database = 'mcpulse' AND name = 'served_tool_schemas_in'") == 0 {
		t.Skip("served_tool_schemas_in (the schema workstream's migration) is not there yet")
	}
	h.publish(ingest.TopicToolCalls, recordedSDKEvent(t, "tools_list_dispatcher"))
	c := h.consumer(nil)
	h.drain(c)
	var values [][]byte
	for _, name := range []string{"tool_call_dispatcher_ok", "tool_call_dispatcher_misnamed", "tool_call_dispatcher_wrong_type", "tool_call_dispatcher_unknown_tool"} {
		values = append(values, recordedSDKEvent(t, name))
	}
	// Not from the SDK ($mcp_source absent), no server name: no listing of its own.
	values = append(values, envelope(uuidN(600), ingest.EventToolCall, "go-user", base, map[string]any{
		"$mcp_tool_name": "search", "$mcp_parameters": map[string]any{"value": 1, "precision": 2}}))
	h.publish(ingest.TopicToolCalls, values...)
	h.drain(c)
	c.Close()

	// A new member with an empty cache reads the nameless listing back from ClickHouse.
	var env map[string]any
	if err := json.Unmarshal(recordedSDKEvent(t, "tool_call_dispatcher_misnamed"), &env); err != nil {
		t.Fatal(err)
	}
	env["uuid"] = uuidN(601)
	again, _ := json.Marshal(env)
	h.publish(ingest.TopicToolCalls, again)
	h.drain(h.consumer(nil))

	type derived struct {
		server, source, reason, keys, class string
		unknown                             uint8
	}
	got := map[string]derived{}
	rows, err := h.ch.Query(context.Background(), `SELECT toString(uuid), server_name, ignored_keys_source, ignored_keys_reason,
		arrayStringConcat(ignored_keys, ','), error_class, unknown_tool FROM mcpulse.tool_calls FINAL`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		var d derived
		if err := rows.Scan(&id, &d.server, &d.source, &d.reason, &d.keys, &d.class, &d.unknown); err != nil {
			t.Fatal(err)
		}
		got[id] = d
	}
	uuidOf := func(name string) string {
		var e struct{ UUID string }
		if err := json.Unmarshal(recordedSDKEvent(t, name), &e); err != nil {
			t.Fatal(err)
		}
		return e.UUID
	}
	want := map[string]derived{
		uuidOf("tool_call_dispatcher_ok"):           {source: "schema"},
		uuidOf("tool_call_dispatcher_misnamed"):     {source: "schema", keys: "precision"},
		uuidOf("tool_call_dispatcher_wrong_type"):   {source: "schema", class: "validation_type"},
		uuidOf("tool_call_dispatcher_unknown_tool"): {source: "not_measurable", reason: "no_schema", class: "unknown_tool", unknown: 1},
		uuidN(600): {source: "not_measurable", reason: "no_schema"},
		uuidN(601): {source: "schema", keys: "precision"},
	}
	if !maps.Equal(got, want) {
		t.Errorf("derived per call:\n got %+v\nwant %+v", got, want)
	}
}

// servedInserts wraps the consumer's ClickHouse connection and counts the rows it sends to
// served_tool_schemas_in.
type servedInserts struct {
	driver.Conn
	rows atomic.Int64
}

func (s *servedInserts) PrepareBatch(ctx context.Context, query string, opts ...driver.PrepareBatchOption) (driver.Batch, error) {
	b, err := s.Conn.PrepareBatch(ctx, query, opts...)
	if err != nil || !strings.Contains(query, "mcpulse.served_tool_schemas_in") {
		return b, err
	}
	return &countedBatch{Batch: b, rows: &s.rows}, nil
}

// countedBatch adds the rows of each block it sends to rows.
type countedBatch struct {
	driver.Batch
	rows *atomic.Int64
}

func (b *countedBatch) Flush() error {
	b.rows.Add(int64(b.Batch.Rows()))
	return b.Batch.Flush()
}

func (b *countedBatch) Send() error {
	b.rows.Add(int64(b.Batch.Rows()))
	return b.Batch.Send()
}

// A batch that lists the same tools again and again sends each (server, version, tool, schema
// hash) at most twice, and v_served_tool_schemas ends as it would with every listed tool's
// row: the same rows inserted in full, in batch order, under another server name, fold to the
// same first and last seen, description, truncated flag and schema. The listings tie within
// seconds (ClickHouse's DateTime drops the fraction), at the earliest and the latest second,
// each with its own descriptions, and one tool's schema changes halfway.
func TestRepeatedListingsOfABatchStoreWhatEveryRowWould(t *testing.T) {
	h := newHarness(t)
	if h.count("SELECT count() FROM system.tables WHERE database = 'mcpulse' AND name = 'served_tool_schemas_in'") == 0 {
		t.Skip("served_tool_schemas_in (the schema workstream's migration) is not there yet")
	}
	var listing map[string]any
	if err := json.Unmarshal(recordedSDKEvent(t, "tools_list_zod"), &listing); err != nil {
		t.Fatal(err)
	}
	// Milliseconds past base of each listing, in publish order (all of one session: one
	// partition, so the batch holds them in this order).
	offsets := []int{5000, 2700, 2100, 9200, 4000, 2400, 9800, 9200, 7000, 2000, 6500, 9999, 3000, 2000, 8000, 9000}
	var values [][]byte
	for i, ms := range offsets {
		ev := maps.Clone(listing)
		ev["uuid"] = uuidN(700 + i)
		ev["timestamp"] = base.Add(time.Duration(ms) * time.Millisecond).Format(time.RFC3339Nano)
		props := maps.Clone(ev["properties"].(map[string]any))
		response := maps.Clone(props["$mcp_response"].(map[string]any))
		var tools []any
		for j, tl := range response["tools"].([]any) {
			tool := maps.Clone(tl.(map[string]any))
			tool["description"] = fmt.Sprintf("%s, as listed by event %d", tool["description"], i)
			if j == 0 && i >= len(offsets)/2 {
				tool["inputSchema"] = map[string]any{"type": "object", "properties": map[string]any{"a": map[string]any{"type": "number"}}}
			}
			tools = append(tools, tool)
		}
		response["tools"] = tools
		props["$mcp_response"] = response
		ev["properties"] = props
		v, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		values = append(values, v)
	}
	h.publish(ingest.TopicToolCalls, values...)
	sent := &servedInserts{Conn: h.ch}
	c := h.consumer(func(cfg *consumers.Config) { cfg.ClickHouse = sent })
	h.drain(c)

	// Every row, uncollapsed, in the batch's order, under another server name.
	var all ingest.Rows
	for _, v := range values {
		ev, err := ingest.Parse(v)
		if err != nil {
			t.Fatal(err)
		}
		all.Append(ev, ingest.RowContext{})
	}
	server := all.ServedSchemas[0].ServerName
	for i := range all.ServedSchemas {
		all.ServedSchemas[i].ServerName = "every row of " + server
	}
	whole, err := chwrite.NewTable[ingest.ServedSchemaRow]("mcpulse.served_tool_schemas_in")
	if err != nil {
		t.Fatal(err)
	}
	if err := whole.Insert(context.Background(), h.ch, all.ServedSchemas); err != nil {
		t.Fatal(err)
	}

	keys := h.count("SELECT count() FROM mcpulse.v_served_tool_schemas WHERE server_name = ?", server)
	if keys != 6 {
		t.Fatalf("%d served schemas stored, want the 5 tools listed and the changed schema", keys)
	}
	if s := c.Stats(); s.Batches != 1 || s.Stored["tools_list"] != int64(len(offsets)) {
		t.Fatalf("stats %+v: want the %d listings stored in one batch", s, len(offsets))
	}
	if n := sent.rows.Load(); n > 2*keys || n >= int64(len(all.ServedSchemas)) {
		t.Errorf("%d rows sent to served_tool_schemas_in for %d listed tools with %d distinct schemas: want at most two per schema", n, len(all.ServedSchemas), keys)
	}
	stored := func(server string) []string {
		rows, err := h.ch.Query(context.Background(), `SELECT concat(server_version, ' ', tool_name, ' ', schema_sha256, ' ', toString(first_seen), ' ',
			toString(last_seen), ' ', toString(truncated), ' ', description, ' schema ', toString(cityHash64(input_schema)))
			FROM mcpulse.v_served_tool_schemas WHERE server_name = ? ORDER BY server_version, tool_name, schema_sha256`, server)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				t.Fatal(err)
			}
			out = append(out, s)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	got, want := stored(server), stored("every row of "+server)
	if !slices.Equal(got, want) {
		t.Errorf("v_served_tool_schemas of the batch:\n%s\nwant, as every row stores it:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
