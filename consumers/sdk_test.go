package consumers_test

import (
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
