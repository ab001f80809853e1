package consumers_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/mcpulse/mcpulse/consumers"
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

// Every kind the MCP analytics SDK sends is stored, and an event of any other name is counted:
// nothing is dead-lettered or dropped. Replaying the topic changes nothing.
func TestSDKEventsAreStoredAndOtherNamesCounted(t *testing.T) {
	h := newHarness(t)
	var values [][]byte
	for _, name := range []string{"initialize", "tools_list_zod", "tool_call_ok", "tool_call_wrong_type", "exception_wrong_type"} {
		values = append(values, recordedSDKEvent(t, name))
	}
	values = append(values,
		envelope(uuidN(1), "$identify", "ses_1", base, map[string]any{"$set": map[string]any{"email": "a@example.com"}}),
		envelope(uuidN(2), "$mcp_resource_read", "ses_1", base, map[string]any{"$mcp_resource_name": "file:///x"}),
		envelope(uuidN(3), "$identify", "ses_2", base, map[string]any{}),
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
		"SELECT count() FROM mcpulse.other_events FINAL":                                                                                                                      3,
		"SELECT count() FROM mcpulse.other_events FINAL WHERE event = '$identify'":                                                                                            2,
		"SELECT count() FROM mcpulse.dead_letters FINAL":                                                                                                                      0,
	} {
		if got := h.count(query); got != want {
			t.Errorf("%s = %d, want %d", query, got, want)
		}
	}
	if s := c.Stats(); s.Stored["tools_list"] != 1 || s.Stored["other"] != 3 || s.Stored["initialize"] != 1 || s.Stored["exception"] != 1 || s.DeadLettered != 0 {
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
