package ingest_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/mcpulse/mcpulse/ingest"
)

// recorded returns one event the real @posthog/mcp 0.16.3 sent (the gateway workstream's
// recordings, ingest/gateway/testdata/sdk), parsed.
func recorded(t *testing.T, name string) *ingest.Event {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("gateway", "testdata", "sdk", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	ev, err := ingest.Parse(data)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return ev
}

// extraKeys returns the keys of an event's Extra.
func extraKeys(t *testing.T, ev *ingest.Event) map[string]json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(ev.Extra, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// Every event the SDK sent is valid and lands in its kind.
func TestParseRecordedSDKEvents(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("gateway", "testdata", "sdk", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no recordings: %v", err)
	}
	want := map[string]*ingest.Kind{"initialize": ingest.KindInitialize, "tools_list": ingest.KindToolsList,
		"tool_call": ingest.KindToolCall, "exception": ingest.KindException}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		ev := recorded(t, name)
		var kind *ingest.Kind
		for prefix, k := range want {
			if strings.HasPrefix(name, prefix) {
				kind = k
			}
		}
		if ev.Kind != kind {
			t.Errorf("%s: kind %s, want %s", name, ev.Kind, kind)
		}
	}
}

func TestParseSDKToolCall(t *testing.T) {
	ev := recorded(t, "tool_call_ok")
	tc := ev.ToolCall
	if tc.ServerName != "mcpulse-fixture-zod" || tc.ServerVersion != "1.4.0" || tc.ProtocolVersion == "" ||
		tc.Source != "posthog_mcp_analytics" || tc.Intent == "" || tc.IntentSource != "context_parameter" || tc.ClientName == "" {
		t.Errorf("tool call %+v", tc)
	}
	if tc.IgnoredKeysReported || len(tc.Parameters) == 0 || len(tc.Response) == 0 {
		t.Errorf("reported %v, parameters %d bytes, response %d bytes: the derivation inputs", tc.IgnoredKeysReported, len(tc.Parameters), len(tc.Response))
	}
	extra := extraKeys(t, ev)
	// The captured request and result feed the derived columns (ignored keys, their source,
	// the error class): a call used rightly stores neither.
	for _, held := range []string{"$mcp_tool_name", "$mcp_server_name", "$mcp_server_version", "$mcp_protocol_version", "$mcp_source",
		"$mcp_intent", "$mcp_intent_source", "$mcp_client_name", "$session_id", "$mcp_is_error", "$mcp_duration_ms",
		"$mcp_parameters", "$mcp_response"} {
		if _, ok := extra[held]; ok {
			t.Errorf("properties keep %s, which a column holds", held)
		}
	}
	for _, kept := range []string{"$mcp_tool_description", "$lib"} {
		if _, ok := extra[kept]; !ok {
			t.Errorf("properties lack %s, which no column holds", kept)
		}
	}
	var rows ingest.Rows
	rows.Append(ev, ingest.RowContext{})
	r := rows.ToolCalls[0]
	if r.ServerName != tc.ServerName || r.Intent != tc.Intent || r.Source != tc.Source || r.IgnoredKeysSource != "" || r.ErrorClass != "" {
		t.Errorf("row %+v", r)
	}
	if r.Misused() || r.Properties != string(ev.Extra) {
		t.Errorf("a call used rightly: misused %v, properties %s, want Extra", r.Misused(), r.Properties)
	}

	// A call the server refused for a wrong argument type keeps what the agent sent.
	failed := recorded(t, "tool_call_wrong_type")
	rows = ingest.Rows{}
	rows.Append(failed, ingest.RowContext{})
	r = rows.ToolCalls[0]
	if r.IsError != 1 || !strings.Contains(r.ErrorMessage, "expected number") || r.ErrorClass != "validation_type" {
		t.Errorf("failed call row: is_error %d, message %q, class %q", r.IsError, r.ErrorMessage, r.ErrorClass)
	}
	checkKeptParameters(t, failed, r.Properties)
}

// checkKeptParameters checks that a misused call's properties are its Extra plus its
// $mcp_parameters, compacted, and no $mcp_response.
func checkKeptParameters(t *testing.T, ev *ingest.Event, properties string) {
	t.Helper()
	var got, extra map[string]json.RawMessage
	if err := json.Unmarshal([]byte(properties), &got); err != nil {
		t.Fatalf("properties %s: %v", properties, err)
	}
	if err := json.Unmarshal(ev.Extra, &extra); err != nil {
		t.Fatal(err)
	}
	var params bytes.Buffer
	if err := json.Compact(&params, ev.ToolCall.Parameters); err != nil {
		t.Fatal(err)
	}
	if string(got["$mcp_parameters"]) != params.String() || len(params.Bytes()) < 20 {
		t.Errorf("properties keep $mcp_parameters %s, want %s", got["$mcp_parameters"], params.Bytes())
	}
	if _, ok := got["$mcp_response"]; ok {
		t.Errorf("properties keep $mcp_response")
	}
	delete(got, "$mcp_parameters")
	if len(got) != len(extra) {
		t.Errorf("properties %s, want Extra %s plus $mcp_parameters", properties, ev.Extra)
	}
	for k, v := range extra {
		if string(got[k]) != string(v) {
			t.Errorf("properties[%s] = %s, want %s", k, got[k], v)
		}
	}
}

// A misused call keeps its $mcp_parameters: ignored keys reported, a validation error, an
// unknown tool; the value is compacted and invalid UTF-8 re-encoded, as in Extra.
func TestToolCallPropertiesKeepMisusedCallsArguments(t *testing.T) {
	args := map[string]any{"query": "q", "limti": 5}
	params := map[string]any{"request": map[string]any{"method": "tools/call", "params": map[string]any{"name": "t", "arguments": args}}}
	for _, c := range []struct {
		name    string
		props   map[string]any
		misused bool
	}{
		{"used rightly", map[string]any{"$mcp_ignored_keys": []string{}}, false},
		{"keys reported", map[string]any{"$mcp_ignored_keys": []string{"limti"}}, true},
		{"validation error", map[string]any{"$mcp_is_error": true, "$mcp_error_message": "MCP error -32602: Input validation error: Invalid arguments for tool t: Expected number, received string at limit"}, true},
		{"other error", map[string]any{"$mcp_is_error": true, "$mcp_error_message": "upstream timed out"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			props := map[string]any{"$mcp_parameters": params, "$mcp_response": map[string]any{"content": []any{}}, "$lib": "posthog-node"}
			for k, v := range c.props {
				props[k] = v
			}
			ev := mustParse(t, envelope(t, ingest.KindToolCall, nil, props))
			if strings.Contains(string(ev.Extra), "$mcp_parameters") || strings.Contains(string(ev.Extra), "$mcp_response") {
				t.Errorf("Extra %s keeps the captured request or result", ev.Extra)
			}
			var rows ingest.Rows
			rows.Append(ev, ingest.RowContext{})
			r := &rows.ToolCalls[0]
			if r.Misused() != c.misused {
				t.Fatalf("misused %v, want %v (row %+v)", r.Misused(), c.misused, r)
			}
			if !c.misused {
				if r.Properties != string(ev.Extra) {
					t.Errorf("properties %s, want Extra %s", r.Properties, ev.Extra)
				}
				// What the consumer finds later (an unknown tool) makes it misused.
				r.UnknownTool = 1
				r.Properties = ingest.ToolCallProperties(ev, r)
			}
			checkKeptParameters(t, ev, r.Properties)
		})
	}

	// Loose and invalid UTF-8 parameters; nothing else left.
	in := `{"uuid":"` + testUUID + `","event":"$mcp_tool_call","distinct_id":"d","timestamp":"2026-01-01T00:00:00Z","properties":{` +
		`"$mcp_tool_name":"t","$mcp_ignored_keys":["x"],"$mcp_parameters": { "a" : [ 1 , "b` + "\xff" + `" ] } }}`
	ev, err := ingest.Parse([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	var rows ingest.Rows
	rows.Append(ev, ingest.RowContext{})
	if got, want := rows.ToolCalls[0].Properties, `{"$mcp_parameters":{"a":[1,"b`+"\uFFFD"+`"]}}`; got != want {
		t.Errorf("properties %q, want %q", got, want)
	}
}

// `source` wins over the SDK's $mcp_source, which then stays in properties; a reported list,
// even empty, marks the row's source as reported.
func TestParseSourceAndReportedKeys(t *testing.T) {
	ev := mustParse(t, envelope(t, ingest.KindToolCall, nil, map[string]any{"source": "mcp", "$mcp_source": "posthog_mcp_analytics", "$mcp_ignored_keys": []string{}}))
	if ev.ToolCall.Source != "mcp" || !strings.Contains(string(ev.Extra), `"$mcp_source":"posthog_mcp_analytics"`) || !ev.ToolCall.IgnoredKeysReported {
		t.Errorf("source %q, extra %s, reported %v", ev.ToolCall.Source, ev.Extra, ev.ToolCall.IgnoredKeysReported)
	}
	var rows ingest.Rows
	rows.Append(ev, ingest.RowContext{})
	if rows.ToolCalls[0].IgnoredKeysSource != "reported" {
		t.Errorf("source %q, want reported", rows.ToolCalls[0].IgnoredKeysSource)
	}
	_, err := ingest.Parse(envelope(t, ingest.KindToolCall, nil, map[string]any{"source": "mcp", "$mcp_source": 5}))
	if err == nil || !strings.Contains(err.Error(), "properties.$mcp_source: must be a string") {
		t.Errorf("a $mcp_source number: %v", err)
	}
}

func TestParseSDKToolsList(t *testing.T) {
	ev := recorded(t, "tools_list_json")
	tl := ev.ToolsList
	if tl.ServerName != "mcpulse-fixture-json" || len(tl.ListedToolNames) != 6 || len(tl.Tools) != 6 {
		t.Fatalf("tools list: server %q, %d listed, %d tools", tl.ServerName, len(tl.ListedToolNames), len(tl.Tools))
	}
	var rows ingest.Rows
	rows.Append(ev, ingest.RowContext{})
	if len(rows.ServedSchemas) != 6 {
		t.Fatalf("%d served schema rows, want 6", len(rows.ServedSchemas))
	}
	truncated := map[string]bool{}
	for i, r := range rows.ServedSchemas {
		sum := sha256.Sum256([]byte(r.InputSchema))
		if r.ToolName != tl.ListedToolNames[i] || r.SchemaSHA256 != hex.EncodeToString(sum[:]) || r.EventUUID != ev.UUID ||
			!r.SeenAt.Equal(ev.Timestamp) || r.ServerVersion != tl.ServerVersion || !json.Valid([]byte(r.InputSchema)) {
			t.Errorf("row %d: %+v", i, r)
		}
		if !strings.Contains(string(ev.Properties), r.InputSchema) {
			t.Errorf("%s: input schema is not the text as received", r.ToolName)
		}
		truncated[r.ToolName] = r.Truncated == 1
	}
	// The SDK cut query-insights' schema ("[Object]") and redacted connect-source's api key.
	if !truncated["query-insights"] || !truncated["connect-source"] || truncated["search-logs"] {
		t.Errorf("truncated flags %v", truncated)
	}
}

// A listing's pages: the request's cursor where the wrapped server captures it
// ($mcp_parameters.request.params) or where a custom dispatcher may put it, and the result's
// nextCursor. A cursor that is present but empty still marks a later page.
func TestParseSDKToolsListPages(t *testing.T) {
	if tl := recorded(t, "tools_list_json").ToolsList; tl.HasCursor || tl.Cursor != "" || tl.NextCursor != "" {
		t.Errorf("a one-page listing: cursor %q (%v), next %q", tl.Cursor, tl.HasCursor, tl.NextCursor)
	}
	for _, tc := range []struct {
		params     any
		response   any
		cursor     string
		hasCursor  bool
		nextCursor string
	}{
		{map[string]any{"request": map[string]any{"method": "tools/list", "params": map[string]any{}}}, map[string]any{"tools": []any{}, "nextCursor": "eyJvIjoyfQ=="}, "", false, "eyJvIjoyfQ=="},
		{map[string]any{"request": map[string]any{"method": "tools/list", "params": map[string]any{"cursor": "eyJvIjoyfQ=="}}}, map[string]any{"tools": []any{}}, "eyJvIjoyfQ==", true, ""},
		{map[string]any{"request": map[string]any{"params": map[string]any{"cursor": ""}}}, nil, "", true, ""},
		{map[string]any{"params": map[string]any{"cursor": "c2"}}, map[string]any{"nextCursor": "c3"}, "c2", true, "c3"},
		{map[string]any{"cursor": "c9"}, nil, "c9", true, ""},
		{map[string]any{"request": map[string]any{"params": map[string]any{"cursor": nil}}}, map[string]any{"nextCursor": 7}, "", false, ""},
	} {
		props := map[string]any{"$mcp_parameters": tc.params}
		if tc.response != nil {
			props["$mcp_response"] = tc.response
		}
		ev, err := ingest.Parse(envelope(t, ingest.KindToolsList, nil, props))
		if err != nil {
			t.Fatal(err)
		}
		if tl := ev.ToolsList; tl.Cursor != tc.cursor || tl.HasCursor != tc.hasCursor || tl.NextCursor != tc.nextCursor {
			t.Errorf("%v / %v: cursor %q (%v), next %q; want %q (%v), %q", tc.params, tc.response, tl.Cursor, tl.HasCursor, tl.NextCursor, tc.cursor, tc.hasCursor, tc.nextCursor)
		}
		if _, ok := extraKeys(t, ev)["$mcp_parameters"]; !ok {
			t.Error("$mcp_parameters of a tools list not kept in properties")
		}
	}
}

func TestParseSDKInitializeAndException(t *testing.T) {
	in := recorded(t, "initialize").Initialize
	if in.ClientName != "mcpulse-fixture-client" || in.ServerName != "mcpulse-fixture-zod" || in.ProtocolVersion != "2025-11-25" ||
		in.RequestedProtocolVersion != "2025-11-25" || in.ClientCapabilities != "{}" || in.ServerCapabilities != `{"tools":{"listChanged":true}}` || in.SessionID == "" {
		t.Errorf("initialize %+v", in)
	}
	ev := recorded(t, "exception_wrong_type")
	x := ev.Exception
	if x.ToolName != "get-sum" || x.Type != "Error" || !strings.HasPrefix(x.Message, "MCP error -32602: Input validation error") || x.Level != "error" || x.ServerVersion != "1.4.0" {
		t.Errorf("exception %+v", x)
	}
	if _, ok := extraKeys(t, ev)["$exception_list"]; !ok {
		t.Error("$exception_list (stack frames, further exceptions) not kept in properties")
	}
	var rows ingest.Rows
	rows.Append(ev, ingest.RowContext{})
	if c := rows.Exceptions[0].ErrorClass; c != "validation_type" {
		t.Errorf("error class %q", c)
	}
	rows = ingest.Rows{}
	rows.Append(recorded(t, "exception_unknown_tool_json"), ingest.RowContext{})
	if c := rows.Exceptions[0].ErrorClass; c != "unknown_tool" {
		t.Errorf("unknown tool's error class %q", c)
	}
}

// The SDK's nested payloads never make an event invalid: what is not where it should be is
// left empty; the SDK's own top-level properties are typed like any other.
func TestParseSDKPayloadsOfAnotherShape(t *testing.T) {
	for _, props := range []map[string]any{
		{"$mcp_response": "[Object]", "$mcp_parameters": []int{1}},
		{"$mcp_response": map[string]any{"tools": []any{"[MaxProperties ~]", map[string]any{"name": 5}, map[string]any{"name": "ok", "inputSchema": "[Object]"}}}},
	} {
		for _, kind := range []*ingest.Kind{ingest.KindToolsList, ingest.KindInitialize, ingest.KindException} {
			ev, err := ingest.Parse(envelope(t, kind, nil, props))
			if err != nil {
				t.Errorf("%s with %v: %v", kind.Name, props, err)
				continue
			}
			var rows ingest.Rows
			rows.Append(ev, ingest.RowContext{})
			if kind == ingest.KindToolsList && len(ev.ToolsList.Tools) > 1 {
				t.Errorf("tools %+v", ev.ToolsList.Tools)
			}
		}
	}
	_, err := ingest.Parse(envelope(t, ingest.KindToolsList, nil, map[string]any{"$mcp_server_name": 1, "$mcp_listed_tool_names": []any{"a", 2}}))
	if err == nil || !strings.Contains(err.Error(), "properties.$mcp_server_name: must be a string") || !strings.Contains(err.Error(), "properties.$mcp_listed_tool_names[1]: must be a string") {
		t.Errorf("typed SDK properties: %v", err)
	}
}

// servedRow is a served-schema row of event n, seen at second sec plus ms milliseconds past
// 2026-11-20T10:00:00Z.
func servedRow(n int, version, tool, sha string, sec, ms int, desc string, truncated uint8) ingest.ServedSchemaRow {
	return ingest.ServedSchemaRow{
		ServerName: "srv", ServerVersion: version, ToolName: tool, SchemaSHA256: sha, InputSchema: `{"type":"object","sha":"` + sha + `"}`,
		Description: desc, Truncated: truncated, EventUUID: uuid.UUID{15: byte(n)},
		SeenAt: time.Date(2026, 11, 20, 10, 0, sec, ms*int(time.Millisecond), time.UTC),
	}
}

// servedState is what served_tool_schemas folds of one key's rows: any input_schema, argMax
// description by seen_at (in whole seconds, as the DateTime column stores it; the first value
// met wins a tie, as ClickHouse's argMax), max truncated, min and max seen_at.
type servedState struct {
	schema, description string
	truncated           uint8
	first, last         int64
}

// foldServed folds rows, in order, per key (server name, version, tool, schema hash).
func foldServed(rows []ingest.ServedSchemaRow) map[[4]string]servedState {
	out := map[[4]string]servedState{}
	for _, r := range rows {
		k := [4]string{r.ServerName, r.ServerVersion, r.ToolName, r.SchemaSHA256}
		sec := r.SeenAt.Unix()
		s, ok := out[k]
		if !ok {
			out[k] = servedState{schema: r.InputSchema, description: r.Description, truncated: r.Truncated, first: sec, last: sec}
			continue
		}
		if sec > s.last {
			s.last, s.description = sec, r.Description
		}
		s.first, s.truncated = min(s.first, sec), max(s.truncated, r.Truncated)
		out[k] = s
	}
	return out
}

// A batch's served-schema rows keep at most two rows per key: the first row of its earliest
// second and the first row of its latest second (one row when that is the same second), in
// batch order, each its own event's, with the key's largest truncated flag.
func TestCollapseServedSchemas(t *testing.T) {
	rows := []ingest.ServedSchemaRow{
		servedRow(1, "1.0", "t", "a", 5, 0, "d5", 0),
		servedRow(2, "1.0", "t", "a", 2, 0, "d2", 0), // the earliest second's first row: kept
		servedRow(3, "1.0", "u", "b", 4, 0, "only", 0),
		servedRow(4, "1.0", "t", "a", 9, 100, "d9", 0), // the latest second's first row: kept
		servedRow(5, "1.0", "t", "a", 2, 500, "d2 again", 1),
		servedRow(6, "1.0", "w", "c", 3, 0, "c first", 0), // three rows of one second: this one kept
		servedRow(7, "1.0", "t", "a", 9, 900, "d9 later in the second", 0),
		servedRow(8, "1.0", "w", "c", 3, 200, "c second", 1),
		servedRow(9, "1.0", "t", "a2", 1, 0, "other schema", 0),
		servedRow(10, "1.1", "t", "a", 1, 0, "other version", 0),
		servedRow(11, "1.0", "t", "a", 7, 0, "d7", 0),
		servedRow(12, "1.0", "w", "c", 3, 999, "c third", 0),
		servedRow(13, "1.0", "t", "a2", 0, 0, "other schema, earlier", 0),
	}
	want := foldServed(rows)
	type kept struct {
		event     byte
		desc      string
		truncated uint8
	}
	wantRows := []kept{{2, "d2", 1}, {3, "only", 0}, {4, "d9", 1}, {6, "c first", 1}, {9, "other schema", 0}, {10, "other version", 0}, {13, "other schema, earlier", 0}}

	got := ingest.CollapseServedSchemas(slices.Clone(rows))
	var gotRows []kept
	for _, r := range got {
		gotRows = append(gotRows, kept{r.EventUUID[15], r.Description, r.Truncated})
		if orig := rows[r.EventUUID[15]-1]; !r.SeenAt.Equal(orig.SeenAt) || r.InputSchema != orig.InputSchema || r.ToolName != orig.ToolName {
			t.Errorf("event %d: row %+v, its event's row %+v", r.EventUUID[15], r, orig)
		}
	}
	if !slices.Equal(gotRows, wantRows) {
		t.Errorf("rows kept %v, want %v", gotRows, wantRows)
	}
	if g := foldServed(got); !maps.Equal(g, want) {
		t.Errorf("folded %v, want %v", g, want)
	}

	// No key repeated: the rows as they are.
	if got := ingest.CollapseServedSchemas(slices.Clone(rows[:3])); len(got) != 3 || got[0].EventUUID != rows[0].EventUUID || got[2].EventUUID != rows[2].EventUUID {
		t.Errorf("rows without repeats: %+v", got)
	}
}

// On batches of random listings (few keys, seconds that tie often, random flags) the rows kept
// fold to the same states as all the rows, with at most two rows per key.
func TestCollapseServedSchemasFoldsAsAllRows(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 500 {
		rows := make([]ingest.ServedSchemaRow, r.IntN(60))
		for i := range rows {
			rows[i] = servedRow(i, "1."+strconv.Itoa(r.IntN(2)), "t"+strconv.Itoa(r.IntN(3)), "s"+strconv.Itoa(r.IntN(2)),
				r.IntN(5), r.IntN(1000), "d"+strconv.Itoa(i), uint8(r.IntN(8)/7))
		}
		want := foldServed(rows)
		got := ingest.CollapseServedSchemas(slices.Clone(rows))
		for k, g := range foldServed(got) {
			if g != want[k] {
				t.Fatalf("%v: folded %+v, want %+v", k, g, want[k])
			}
		}
		if g := foldServed(got); len(g) != len(want) {
			t.Fatalf("%d keys folded, want %d", len(g), len(want))
		}
		perKey := map[[4]string]int{}
		for _, x := range got {
			k := [4]string{x.ServerName, x.ServerVersion, x.ToolName, x.SchemaSHA256}
			if perKey[k]++; perKey[k] > 2 {
				t.Fatalf("more than two rows of %v", k)
			}
		}
	}
}
