package otlp_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/mcpulse/mcpulse/ingest"
	"github.com/mcpulse/mcpulse/ingest/otlp"
	"github.com/mcpulse/mcpulse/misuse"
)

// recorded decodes one of testdata/exports: exports as the gateway received them from the real
// instrumentations (recorded by the gateway's end-to-end tests with MCPULSE_RECORD_OTLP).
func recorded(t testing.TB, name string) otlp.Result {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "exports", name))
	if err != nil {
		t.Fatal(err)
	}
	enc := otlp.Protobuf
	if strings.HasSuffix(name, ".json") {
		enc = otlp.JSON
	}
	req, err := otlp.Decode(enc, data, 0)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return otlp.Map(req)
}

// mapped is an event as the tests read it.
type mapped struct {
	Event, DistinctID string
	Props             map[string]json.RawMessage
}

func events(t *testing.T, res otlp.Result) []mapped {
	t.Helper()
	var out []mapped
	for _, raw := range res.Events {
		ev, err := ingest.Parse(raw)
		if err != nil {
			t.Fatalf("ingest.Parse refuses a mapped event: %v\n%s", err, raw)
		}
		var env ingest.Envelope
		if err := json.Unmarshal(raw, &env); err != nil {
			t.Fatal(err)
		}
		out = append(out, mapped{ev.Kind.Event, env.DistinctID, env.Properties})
	}
	return out
}

func str(raw json.RawMessage) string {
	var s string
	_ = json.Unmarshal(raw, &s)
	return s
}

// Traceloop traces the client: every call with its raw arguments, its error in the span
// status; the server and client named by the trace's initialize span; the session is the
// client session's trace.
func TestMapTraceloopClient(t *testing.T) {
	res := recorded(t, "traceloop-client.json")
	if want := map[otlp.Outcome]int{otlp.OutcomeMapped: 7, otlp.OutcomeNotMCP: 1}; !reflect.DeepEqual(res.Counts, want) {
		t.Fatalf("counts %v, want %v (the session span is not an MCP request)", res.Counts, want)
	}
	evs := events(t, res)
	var names []string
	for _, e := range evs {
		names = append(names, e.Event)
		if str(e.Props["$mcp_server_name"]) != "otel-fixture-server" || str(e.Props["$mcp_server_version"]) != "3.0.0" ||
			str(e.Props["$mcp_client_name"]) != "otel-fixture-client" || str(e.Props["$mcp_source"]) != "otlp_traceloop" {
			t.Errorf("%s: session properties %v", e.Event, e.Props)
		}
		if e.DistinctID != str(e.Props["$otel_trace_id"]) || e.DistinctID != str(e.Props["$session_id"]) {
			t.Errorf("%s: distinct_id %s, want the trace id", e.Event, e.DistinctID)
		}
	}
	want := []string{"$mcp_initialize", "$mcp_tools_list", "$mcp_tool_call", "$mcp_tool_call", "$mcp_tool_call", "$exception",
		"$mcp_tool_call", "$exception", "$mcp_tool_call", "$exception"}
	if !reflect.DeepEqual(names, want) {
		t.Fatalf("events %v, want %v", names, want)
	}
	if got := string(evs[1].Props["$mcp_listed_tool_names"]); got != `["lookup","explode"]` {
		t.Errorf("listed %s", got)
	}
	if got := string(evs[1].Props["$mcp_response"]); got != `{"tools":[]}` {
		t.Errorf("tools/list response %s: Traceloop carries no schema, so no tool of it is served with one", got)
	}
	second := evs[3].Props
	if got := string(second["$mcp_parameters"]); got != `{"request":{"method":"tools/call","params":{"arguments":{"city":"Bergen","country":"NO"},"name":"lookup"}}}` {
		t.Errorf("raw arguments %s", got)
	}
	for i, wantMsg := range map[int]string{4: "Input validation error", 6: "Invalid tools/call result", 8: "Tool ghost not found"} {
		if p := evs[i].Props; string(p["$mcp_is_error"]) != "true" || !strings.Contains(str(p["$mcp_error_message"]), wantMsg) {
			t.Errorf("event %d: %v, want an error saying %q", i, p, wantMsg)
		}
	}
}

// Shinzo traces the server's handlers: arguments seen after validation, so the call's
// $mcp_parameters holds the marker and misuse says why it cannot measure.
func TestMapShinzoServer(t *testing.T) {
	res := recorded(t, "shinzo-server.json")
	evs := events(t, res)
	if len(evs) != 4 || evs[3].Event != ingest.EventException {
		t.Fatalf("%d events: %v", len(evs), evs)
	}
	for _, e := range evs[:3] {
		if e.Event != ingest.EventToolCall {
			continue
		}
		p := e.Props
		if str(p["$mcp_server_name"]) != "otel-fixture-shinzo" || str(p["$mcp_source"]) != "otlp_shinzo" || str(p["$session_id"]) == "" {
			t.Errorf("properties %v", p)
		}
		k := misuse.FromParameters(nil, p["$mcp_parameters"])
		if k.Reason != misuse.ReasonArgumentsValidated {
			t.Errorf("%s: %+v, want %s", p["$mcp_parameters"], k, misuse.ReasonArgumentsValidated)
		}
	}
	if got := string(evs[1].Props["$mcp_validated_arguments"]); got != `{"city":"Bergen"}` {
		t.Errorf("validated arguments %s: the undeclared country is gone before the handler", got)
	}
}

// A Go server following the semantic conventions: the tools/list span carries the schemas.
func TestMapGoSemconvServer(t *testing.T) {
	evs := events(t, recorded(t, "go-sdk-semconv.pb"))
	var list *mapped
	calls := 0
	for i, e := range evs {
		switch e.Event {
		case ingest.EventToolsList:
			list = &evs[i]
		case ingest.EventToolCall:
			calls++
			if str(e.Props["$mcp_source"]) != "otlp_semconv" || str(e.Props["$mcp_protocol_version"]) == "" {
				t.Errorf("call %v", e.Props)
			}
		}
	}
	if calls != 6 || list == nil {
		t.Fatalf("%d calls, list %v", calls, list)
	}
	var resp struct {
		Tools []struct {
			Name        string
			InputSchema json.RawMessage
		}
	}
	if err := json.Unmarshal(list.Props["$mcp_response"], &resp); err != nil || len(resp.Tools) != 2 || len(resp.Tools[0].InputSchema) == 0 {
		t.Errorf("tools/list response %s: want both tools with their schemas", list.Props["$mcp_response"])
	}
}

// Map is deterministic: the same export maps to the same uuids (a retried export is
// deduplicated downstream).
func TestMapUUIDsStable(t *testing.T) {
	a, b := recorded(t, "traceloop-client.json"), recorded(t, "traceloop-client.json")
	if !reflect.DeepEqual(a.Events, b.Events) {
		t.Fatal("two maps of one export differ")
	}
	seen := map[string]bool{}
	for _, raw := range a.Events {
		var env ingest.Envelope
		_ = json.Unmarshal(raw, &env)
		if seen[env.UUID] {
			t.Errorf("uuid %s twice", env.UUID)
		}
		seen[env.UUID] = true
	}
}

func TestHexIDsToBase64(t *testing.T) {
	in := `{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"0102030405060708090a0b0c0d0e0f10","spanId":"0102030405060708",` +
		`"parentSpanId":"","name":"traceId","attributes":[{"key":"spanId","value":{"stringValue":"0102030405060708"}}]}]}]}]}`
	out, err := otlp.HexIDsToBase64([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"AQIDBAUGBwgJCgsMDQ4PEA==","spanId":"AQIDBAUGBwg=",` +
		`"parentSpanId":"","name":"traceId","attributes":[{"key":"spanId","value":{"stringValue":"0102030405060708"}}]}]}]}]}`
	// Only the values of id fields: a string that merely says "traceId", or an attribute keyed
	// "spanId" (its key is a value of "key"), is left alone.
	if strings.TrimSpace(string(out)) != want {
		t.Errorf("\n got %s\nwant %s", out, want)
	}
}

// The rules the recorded exports do not exercise, one span each.
func TestMapRules(t *testing.T) {
	trace, span := make([]byte, 16), []byte{1, 2, 3, 4, 5, 6, 7, 8}
	trace[0] = 9
	mk := func(name string, kind tracepb.Span_SpanKind, st *tracepb.Status, kvs ...string) *coltracepb.ExportTraceServiceRequest {
		var attrs []*commonpb.KeyValue
		for i := 0; i+1 < len(kvs); i += 2 {
			attrs = append(attrs, &commonpb.KeyValue{Key: kvs[i], Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: kvs[i+1]}}})
		}
		return &coltracepb.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{ScopeSpans: []*tracepb.ScopeSpans{{Spans: []*tracepb.Span{{
			TraceId: trace, SpanId: span, Name: name, Kind: kind, StartTimeUnixNano: 1_800_000_000_000_000_000,
			EndTimeUnixNano: 1_800_000_000_002_500_000, Attributes: attrs, Status: st,
		}}}}}}}
	}
	errStatus := &tracepb.Status{Code: tracepb.Status_STATUS_CODE_ERROR}
	for _, c := range []struct {
		name    string
		req     *coltracepb.ExportTraceServiceRequest
		outcome otlp.Outcome
		props   map[string]string // property -> JSON text it must hold
	}{
		{"a semconv client span is left to the server's", mk("tools/call a", tracepb.Span_SPAN_KIND_CLIENT, nil, "mcp.method.name", "tools/call", "gen_ai.tool.name", "a"),
			otlp.OutcomeOtherMethod, nil},
		{"another MCP method", mk("resources/read", tracepb.Span_SPAN_KIND_SERVER, nil, "mcp.method.name", "resources/read"), otlp.OutcomeOtherMethod, nil},
		{"the tool from the span name, the error from the JSON-RPC code", mk("tools/call lookup", tracepb.Span_SPAN_KIND_SERVER, errStatus,
			"mcp.method.name", "tools/call", "error.type", "-32601", "rpc.jsonrpc.error_code", "-32601"),
			otlp.OutcomeMapped, map[string]string{"$mcp_tool_name": `"lookup"`, "$mcp_is_error": "true", "$mcp_error_message": `"MCP error -32601"`,
				"$mcp_error_type": `"-32601"`, "$mcp_duration_ms": "2.5", "$mcp_parameters": "", "$session_id": ""}},
		{"arguments that are not JSON are kept as text", mk("tools/call a", tracepb.Span_SPAN_KIND_SERVER, nil,
			"mcp.method.name", "tools/call", "gen_ai.tool.name", "a", "gen_ai.tool.call.arguments", "{oops", "mcp.session.id", "s"),
			otlp.OutcomeMapped, map[string]string{"$mcp_parameters": `{"request":{"method":"tools/call","params":{"arguments":"{oops","name":"a"}}}`,
				"$session_id": `"s"`, "$mcp_is_error": "false"}},
		{"empty arguments are none recorded", mk("tools/call a", tracepb.Span_SPAN_KIND_SERVER, nil,
			"mcp.method.name", "tools/call", "gen_ai.tool.name", "a", "gen_ai.tool.call.arguments", "", "mcp.session.id", "s"),
			otlp.OutcomeMapped, map[string]string{"$mcp_parameters": "", "$mcp_tool_name": `"a"`}},
		{"a Shinzo argument path nests at most 10 levels", mk("tools/call a", tracepb.Span_SPAN_KIND_SERVER, nil,
			"mcp.method.name", "tools/call", "mcp.tool.name", "a", "mcp.session.id", "s",
			"mcp.request.argument."+strings.Repeat("k.", 200_000)+"k", "v"),
			otlp.OutcomeMapped, map[string]string{"$mcp_validated_arguments": `{"k":{"k":{"k":{"k":{"k":{"k":{"k":{"k":{"k":{` +
				strconv.Quote(strings.Repeat("k.", 200_000-9)+"k") + `:"v"}}}}}}}}}}`}},
		{"a tools/call span without a tool", mk("tools/call", tracepb.Span_SPAN_KIND_SERVER, nil, "mcp.method.name", "tools/call"), otlp.OutcomeRejected, nil},
		{"not MCP", mk("GET /", tracepb.Span_SPAN_KIND_SERVER, nil, "http.request.method", "GET"), otlp.OutcomeNotMCP, nil},
	} {
		res := otlp.Map(c.req)
		if res.Counts[c.outcome] != 1 {
			t.Errorf("%s: %v, want %s", c.name, res.Counts, c.outcome)
			continue
		}
		if c.props == nil {
			continue
		}
		var env ingest.Envelope
		if err := json.Unmarshal(res.Events[0], &env); err != nil {
			t.Fatal(err)
		}
		for k, want := range c.props {
			if got := string(env.Properties[k]); got != want {
				t.Errorf("%s: %s = %s, want %s", c.name, k, got, want)
			}
		}
		if env.DistinctID == "" || (env.Properties["$session_id"] == nil && env.DistinctID != "otel-trace:09000000000000000000000000000000") {
			t.Errorf("%s: distinct_id %q", c.name, env.DistinctID)
		}
	}
	// Ids of the wrong length, an end before the start: rejected with the reason.
	bad := mk("tools/call a", tracepb.Span_SPAN_KIND_SERVER, nil, "mcp.method.name", "tools/call", "gen_ai.tool.name", "a")
	s := bad.ResourceSpans[0].ScopeSpans[0].Spans[0]
	s.EndTimeUnixNano = s.StartTimeUnixNano - 1
	if res := otlp.Map(bad); res.Counts[otlp.OutcomeRejected] != 1 || !strings.Contains(res.Rejections[0], "ends before it starts") {
		t.Errorf("end before start: %v %v", res.Counts, res.Rejections)
	}
	s.EndTimeUnixNano, s.SpanId = s.StartTimeUnixNano+1, []byte{1}
	if res := otlp.Map(bad); res.Counts[otlp.OutcomeRejected] != 1 || !strings.Contains(res.Rejections[0], "span id of 1 bytes") {
		t.Errorf("short span id: %v %v", res.Counts, res.Rejections)
	}
}

// Spans are counted before they are decoded: a request of a million empty spans (two bytes
// each in protobuf, "{}" in JSON) is refused with the count, whichever encoding, and a request
// within the limit decodes whole.
func TestDecodeCountsSpansBeforeDecoding(t *testing.T) {
	const limit = 10_000
	empty := &tracepb.ScopeSpans{Spans: make([]*tracepb.Span, 1_000_000)}
	for i := range empty.Spans {
		empty.Spans[i] = &tracepb.Span{}
	}
	pb, err := proto.Marshal(&coltracepb.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{ScopeSpans: []*tracepb.ScopeSpans{empty}}}})
	if err != nil {
		t.Fatal(err)
	}
	js := []byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{}` + strings.Repeat(`,{}`, 999_999) + `]}]}]}`)
	for _, c := range []struct {
		enc  otlp.Encoding
		body []byte
	}{{otlp.Protobuf, pb}, {otlp.JSON, js}} {
		_, err := otlp.Decode(c.enc, c.body, limit)
		var tooMany *otlp.TooManySpansError
		if !errors.As(err, &tooMany) || tooMany.Spans != limit+1 || tooMany.Limit != limit {
			t.Errorf("encoding %v: %v, want a TooManySpansError at %d", c.enc, err, limit+1)
		}
		req, err := otlp.Decode(c.enc, c.body, 0)
		if err != nil || otlp.SpanCount(req) != 1_000_000 {
			t.Errorf("encoding %v without a limit: %v", c.enc, err)
		}
	}
	// Spans inside links or events are not spans of the request.
	req, err := otlp.Decode(otlp.JSON, []byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"links":[{}],"events":[{}]},{}]}]}]}`), 2)
	if err != nil || otlp.SpanCount(req) != 2 {
		t.Errorf("2 spans with a link and an event at limit 2: %v", err)
	}
}
