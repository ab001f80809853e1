package ingest_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/mcpulse/mcpulse/ingest"
	"github.com/mcpulse/mcpulse/internal/safetext"
)

// Every stored dimension is bounded where the event is parsed, the same way whichever kind
// carries it, so a call's long tool name still matches the listing that served it.
func TestParseBoundsStoredDimensions(t *testing.T) {
	longName := func(c string) string { return strings.Repeat(c, 10_000) }
	tool, client, server, version := longName("t"), longName("c"), longName("s"), longName("v")
	message := longName("m") + longName("e")
	call := envelope(t, ingest.KindToolCall, map[string]any{"event": "$mcp_tool_call"}, map[string]any{
		"$mcp_tool_name": tool, "$mcp_client_name": client, "$mcp_server_name": server, "$mcp_server_version": version,
		"$mcp_error_message": message, "$mcp_is_error": true, "$mcp_ignored_keys": []string{longName("k") + longName("p")},
	})
	ev, err := ingest.Parse(call)
	if err != nil {
		t.Fatal(err)
	}
	var rs ingest.Rows
	rs.Append(ev, ingest.RowContext{InsertedAt: time.Now()})
	row := rs.ToolCalls[0]
	for _, c := range []struct {
		what, got, in string
		max           int
	}{
		{"tool_name", row.ToolName, tool, safetext.MaxName},
		{"raw_tool_name", row.RawToolName, tool, safetext.MaxName},
		{"client_name", row.ClientName, client, safetext.MaxName},
		{"server_name", row.ServerName, server, safetext.MaxName},
		{"server_version", row.ServerVersion, version, safetext.MaxName},
		{"error_message", row.ErrorMessage, message, safetext.MaxText},
		{"ignored_keys", row.IgnoredKeys[0], longName("k") + longName("p"), safetext.MaxKeyPath},
	} {
		if c.got != safetext.Bound(c.in, c.max) || len(c.got) > c.max || !safetext.Bounded(c.got) {
			t.Errorf("%s: %d bytes, want %d bytes bounded by safetext.Bound", c.what, len(c.got), c.max)
		}
	}

	listing := envelope(t, ingest.KindToolsList, map[string]any{"event": "$mcp_tools_list", "uuid": uuid.NewString()}, map[string]any{
		"$mcp_server_name": server, "$mcp_server_version": version, "$mcp_listed_tool_names": []string{tool},
		"$mcp_response": map[string]any{"tools": []any{map[string]any{"name": tool, "inputSchema": map[string]any{"type": "object"}}}},
	})
	lev, err := ingest.Parse(listing)
	if err != nil {
		t.Fatal(err)
	}
	tl := lev.ToolsList
	if tl.ListedToolNames[0] != row.ToolName || tl.Tools[0].Name != row.ToolName || tl.ServerName != row.ServerName {
		t.Errorf("a listing bounds its names unlike a call: %q, %q", tl.ListedToolNames[0][200:], tl.Tools[0].Name[200:])
	}
	served := ingest.NewServedSchemaRow(server, version, ingest.ServedTool{Name: tool}, time.Now(), uuid.New())
	if served.ToolName != row.ToolName || served.ServerName != row.ServerName || served.ServerVersion != row.ServerVersion {
		t.Error("a served-schema row bounds its names unlike a call")
	}

	// An unknown event's long name is bounded (events_by_name_hourly), and parsing the
	// published envelope again gives the same name.
	other, err := ingest.Parse(envelope(t, nil, map[string]any{"event": longName("n")}, nil))
	if err != nil {
		t.Fatal(err)
	}
	if other.Name != safetext.Bound(longName("n"), safetext.MaxName) {
		t.Errorf("event name: %d bytes", len(other.Name))
	}
	wire, err := other.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if again, err := ingest.Parse(wire); err != nil || again.Name != other.Name {
		t.Errorf("parsed again: %v, name changed: %v", err, again != nil && again.Name != other.Name)
	}
}
