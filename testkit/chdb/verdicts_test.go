package chdb_test

import (
	"encoding/json"
	"fmt"
	"time"
)

// overLimitLines are two events as the MCP analytics SDK sends them, one JSON line each: a tools
// list at at whose tool "bulk-import" declares 1,001 properties (past the consumer's default
// limit of 1,000) and a call of that tool a second later. The consumer judges the schema over
// the limit and stores its verdict, so both engines hold one and answer the verdict queries
// and the over-limit panel with a row.
func overLimitLines(at time.Time) []byte {
	props := map[string]any{}
	for i := range 1001 {
		props[fmt.Sprintf("field_%04d", i)] = map[string]any{"type": "string"}
	}
	server := map[string]any{"$mcp_server_name": "wide-schemas-mcp", "$mcp_server_version": "0.9.0", "$session_id": "chdb-wide-session"}
	with := func(m map[string]any) map[string]any {
		for k, v := range server {
			m[k] = v
		}
		return m
	}
	listing := map[string]any{
		"uuid": "0192f2a0-0000-7000-8000-00000000c0d1", "event": "$mcp_tools_list", "distinct_id": "agent-wide",
		"timestamp": at.UTC().Format(time.RFC3339),
		"properties": with(map[string]any{
			"$mcp_listed_tool_names": []string{"bulk-import"},
			"$mcp_parameters":        map[string]any{"request": map[string]any{"method": "tools/list", "params": map[string]any{}}},
			"$mcp_response": map[string]any{"tools": []any{
				map[string]any{"name": "bulk-import", "description": "Import records", "inputSchema": map[string]any{"type": "object", "properties": props}},
			}},
		}),
	}
	call := map[string]any{
		"uuid": "0192f2a0-0000-7000-8000-00000000c0d2", "event": "$mcp_tool_call", "distinct_id": "agent-wide",
		"timestamp": at.Add(time.Second).UTC().Format(time.RFC3339),
		"properties": with(map[string]any{
			"$mcp_tool_name": "bulk-import", "$mcp_is_error": false,
			"$mcp_parameters": map[string]any{"request": map[string]any{"method": "tools/call", "params": map[string]any{"name": "bulk-import",
				"arguments": map[string]any{"field_0001": "x"}}}},
			"$mcp_response": map[string]any{"content": []any{map[string]any{"type": "text", "text": "ok"}}},
		}),
	}
	var out []byte
	for _, ev := range []any{listing, call} {
		line, err := json.Marshal(ev)
		if err != nil {
			panic(err) // maps of strings: never
		}
		out = append(append(out, line...), '\n')
	}
	return out
}
