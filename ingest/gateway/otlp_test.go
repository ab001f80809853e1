package gateway_test

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/mcpulse/mcpulse/ingest"
	"github.com/mcpulse/mcpulse/ingest/gateway"
)

func kv(k, v string) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v}}}
}

// semconvRequest is an export of one server (service.name otlp-unit) with a tools/list span,
// a successful call with arguments, a failed call, a span of HTTP (not MCP), and a tools/call
// span without a tool name (malformed).
func semconvRequest(start time.Time) *coltracepb.ExportTraceServiceRequest {
	trace := bytes.Repeat([]byte{0xab}, 16)
	span := func(n byte, name string, dur time.Duration, st *tracepb.Status, attrs ...*commonpb.KeyValue) *tracepb.Span {
		return &tracepb.Span{TraceId: trace, SpanId: []byte{1, 2, 3, 4, 5, 6, 7, n}, Name: name, Kind: tracepb.Span_SPAN_KIND_SERVER,
			StartTimeUnixNano: uint64(start.UnixNano()), EndTimeUnixNano: uint64(start.Add(dur).UnixNano()), Attributes: attrs, Status: st}
	}
	return &coltracepb.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{
		Resource: &resourcepb.Resource{Attributes: []*commonpb.KeyValue{kv("service.name", "otlp-unit"), kv("service.version", "1.0.0")}},
		ScopeSpans: []*tracepb.ScopeSpans{{Spans: []*tracepb.Span{
			span(1, "tools/list", time.Millisecond, nil, kv("mcp.method.name", "tools/list"), kv("mcp.session.id", "s-1"),
				kv("gen_ai.tool.definitions", `[{"name":"add","inputSchema":{"type":"object","properties":{"a":{"type":"number"}}}}]`)),
			span(2, "tools/call add", 1500*time.Microsecond, nil, kv("mcp.method.name", "tools/call"), kv("gen_ai.tool.name", "add"),
				kv("mcp.session.id", "s-1"), kv("gen_ai.tool.call.arguments", `{"a":1,"extra":true}`)),
			span(3, "tools/call add", 2*time.Millisecond, &tracepb.Status{Code: tracepb.Status_STATUS_CODE_ERROR, Message: "boom"},
				kv("mcp.method.name", "tools/call"), kv("gen_ai.tool.name", "add"), kv("mcp.session.id", "s-1"), kv("error.type", "tool_error")),
			span(4, "GET /health", time.Millisecond, nil, kv("http.request.method", "GET")),
			span(5, "tools/call", time.Millisecond, nil, kv("mcp.method.name", "tools/call")),
		}}},
	}}}
}

// postOTLP posts an export and returns the status, the Content-Type and the body.
func postOTLP(t *testing.T, f *fixture, body []byte, headers ...string) (int, string, []byte) {
	t.Helper()
	code, ctype, data, _ := postOTLPHeaders(t, f, body, headers...)
	return code, ctype, data
}

// postOTLPHeaders is postOTLP that also returns the answer's headers.
func postOTLPHeaders(t *testing.T, f *fixture, body []byte, headers ...string) (int, string, []byte, http.Header) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, f.srv.URL+gateway.OTLPTracesPath, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header.Get("Content-Type"), data, res.Header
}

func TestOTLPTracesProtobufJSONAndGzip(t *testing.T) {
	f := newFixture(t, nil)
	req := semconvRequest(time.Now().Add(-time.Minute).Truncate(time.Millisecond))
	pb, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	auth := "Bearer " + testKey
	for _, c := range []struct {
		name, ctype string
		body        []byte
		gzip        bool
	}{
		{"protobuf", "application/x-protobuf", pb, false},
		{"protobuf gzip", "application/x-protobuf", pb, true},
		{"json", "application/json", otlpJSON(t, req), false},
		{"json gzip", "application/json", otlpJSON(t, req), true},
	} {
		body, headers := c.body, []string{"Content-Type", c.ctype, "Authorization", auth}
		if c.gzip {
			body, headers = gzipBytes(t, body), append(headers, "Content-Encoding", "gzip")
		}
		code, ctype, data, h := postOTLPHeaders(t, f, body, headers...)
		if code != http.StatusOK || ctype != c.ctype {
			t.Fatalf("%s: %d %s %q", c.name, code, ctype, data)
		}
		var resp coltracepb.ExportTraceServiceResponse
		if c.ctype == "application/json" {
			err = protojson.Unmarshal(data, &resp)
		} else {
			err = proto.Unmarshal(data, &resp)
		}
		if err != nil {
			t.Fatalf("%s: answer %q: %v", c.name, data, err)
		}
		ps := resp.GetPartialSuccess()
		if ps.GetRejectedSpans() != 1 || !strings.Contains(ps.GetErrorMessage(), "without a tool name") {
			t.Errorf("%s: partial success %v, want 1 rejected (no tool name)", c.name, ps)
		}
		if got := h.Get("Mcpulse-Spans-Mapped") + " " + h.Get("Mcpulse-Spans-Dropped") + " " + h.Get("Mcpulse-Spans-Rejected"); got != "3 1 1" {
			t.Errorf("%s: mapped, dropped, rejected %s, want 3 1 1", c.name, got)
		}
	}
	// Four exports of the same spans: each event once per export, with the same uuids.
	byUUID := map[string]ingest.Envelope{}
	counts := map[string]int{}
	for _, m := range f.messages(ingest.TopicToolCalls) {
		env := envelopeOf(t, m)
		byUUID[env.UUID] = env
		counts[env.Event]++
	}
	if want := map[string]int{ingest.EventToolsList: 4, ingest.EventToolCall: 8, ingest.EventException: 4}; !equalCounts(counts, want) {
		t.Fatalf("published %v, want %v", counts, want)
	}
	if len(byUUID) != 4 {
		t.Fatalf("%d distinct uuids over four exports of the same spans, want 4", len(byUUID))
	}
	for _, env := range byUUID {
		p := env.Properties
		if env.DistinctID != "s-1" || string(p["$session_id"]) != `"s-1"` || string(p["$mcp_server_name"]) != `"otlp-unit"` ||
			string(p["$mcp_source"]) != `"otlp_semconv"` {
			t.Errorf("%s: distinct_id %s, properties %v", env.Event, env.DistinctID, p)
		}
		if env.Event != ingest.EventToolCall {
			continue
		}
		switch string(p["$otel_span_id"]) {
		case `"0102030405060702"`:
			if string(p["$mcp_duration_ms"]) != "1.5" || string(p["$mcp_is_error"]) != "false" ||
				string(p["$mcp_parameters"]) != `{"request":{"method":"tools/call","params":{"arguments":{"a":1,"extra":true},"name":"add"}}}` {
				t.Errorf("successful call: %v", p)
			}
		case `"0102030405060703"`:
			if string(p["$mcp_is_error"]) != "true" || string(p["$mcp_error_message"]) != `"boom"` || string(p["$mcp_error_type"]) != `"tool_error"` {
				t.Errorf("failed call: %v", p)
			}
		default:
			t.Errorf("unexpected call %v", p)
		}
	}
	if m := scrape(t, f); !strings.Contains(m, `mcpulse_gateway_otlp_spans_total{outcome="not_mcp"} 4`) ||
		!strings.Contains(m, `mcpulse_gateway_otlp_spans_total{outcome="rejected"} 4`) ||
		!strings.Contains(m, `mcpulse_gateway_otlp_spans_total{outcome="mapped"} 12`) {
		t.Errorf("span counters:\n%s", grepLines(m, "otlp"))
	}
}

func TestOTLPTracesRefusesBadRequests(t *testing.T) {
	f := newFixture(t, func(c *gateway.Config) { c.MaxEvents = 4; c.MaxBodyBytes = 4096 })
	req := semconvRequest(time.Now())
	pb, _ := proto.Marshal(req)
	auth := "Bearer " + testKey
	for _, c := range []struct {
		name    string
		body    []byte
		headers []string
		code    int
		says    string
	}{
		{"no key", pb, []string{"Content-Type", "application/x-protobuf"}, 401, "missing API key"},
		{"wrong key", pb, []string{"Content-Type", "application/x-protobuf", "Authorization", "Bearer nope"}, 401, "unknown API key"},
		{"media type", pb, []string{"Content-Type", "text/plain", "Authorization", auth}, 415, "unsupported Content-Type"},
		{"bad protobuf", []byte("\xff\xff\xff not protobuf"), []string{"Content-Type", "application/x-protobuf", "Authorization", auth}, 400, "bad OTLP protobuf"},
		{"bad json", []byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"zz","name":1}]}]}]}`), []string{"Content-Type", "application/json", "Authorization", auth}, 400, "bad OTLP JSON"},
		{"not json", []byte(`<xml>` + strings.Repeat("x", 500)), []string{"Content-Type", "application/json", "Authorization", auth}, 400, "bad OTLP JSON"},
		{"bad gzip", []byte("\x1f\x8bnot gzip"), []string{"Content-Type", "application/x-protobuf", "Authorization", auth, "Content-Encoding", "gzip"}, 400, "gzip"},
		{"too many spans", pb, []string{"Content-Type", "application/x-protobuf", "Authorization", auth}, 413, "more than 4 spans in one request, at most 4"},
		{"too many json spans", []byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{},{},{}]},{"spans":[{},{}]}]}]}`), []string{"Content-Type", "application/json", "Authorization", auth}, 413, "more than 4 spans in one request, at most 4"},
		{"too large", bytes.Repeat([]byte{0}, 5000), []string{"Content-Type", "application/x-protobuf", "Authorization", auth}, 413, "body exceeds 4096 bytes"},
	} {
		code, ctype, data := postOTLP(t, f, c.body, c.headers...)
		var st status.Status
		var err error
		if ctype == "application/json" {
			err = protojson.Unmarshal(data, &st)
		} else {
			err = proto.Unmarshal(data, &st)
		}
		if code != c.code || err != nil || !strings.Contains(st.GetMessage(), c.says) {
			t.Errorf("%s: %d %q (%v), want %d saying %q", c.name, code, st.GetMessage(), err, c.code, c.says)
		}
		if len(st.GetMessage()) > 400 {
			t.Errorf("%s: a %d-byte message echoes too much input", c.name, len(st.GetMessage()))
		}
	}
	if n := len(f.messages(ingest.TopicToolCalls)); n != 0 {
		t.Errorf("%d messages published from refused requests", n)
	}
}

// otlpJSON is req in OTLP/JSON: protojson with the ids as hex, as exporters write them.
func otlpJSON(t *testing.T, req *coltracepb.ExportTraceServiceRequest) []byte {
	t.Helper()
	data, err := protojson.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if s, ok := e.(string); ok && (k == "traceId" || k == "spanId") {
					b, err := base64Std(s)
					if err != nil {
						t.Fatal(err)
					}
					x[k] = hex.EncodeToString(b)
					continue
				}
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(doc)
	return mustJSON(t, doc)
}

func equalCounts(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func base64Std(s string) ([]byte, error) { return base64.StdEncoding.DecodeString(s) }

// A span whose event the gateway refuses (here: ending in 2200, past ClickHouse's DateTime)
// counts as rejected, with the reason, and its neighbours are published.
func TestOTLPTracesRefusedEventCountsItsSpan(t *testing.T) {
	f := newFixture(t, nil)
	req := semconvRequest(time.Now().Add(-time.Minute))
	spans := req.ResourceSpans[0].ScopeSpans[0].Spans
	late := time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC)
	spans[2].StartTimeUnixNano, spans[2].EndTimeUnixNano = uint64(late.UnixNano()), uint64(late.Add(time.Millisecond).UnixNano())
	pb, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	code, _, data, h := postOTLPHeaders(t, f, pb, "Content-Type", "application/x-protobuf", "Authorization", "Bearer "+testKey)
	var resp coltracepb.ExportTraceServiceResponse
	if err := proto.Unmarshal(data, &resp); code != http.StatusOK || err != nil {
		t.Fatalf("%d %v", code, err)
	}
	ps := resp.GetPartialSuccess()
	// The failed call's span maps to a tool call and an exception, both refused: one span.
	if ps.GetRejectedSpans() != 2 || !strings.Contains(ps.GetErrorMessage(), "span 0102030405060703: timestamp") {
		t.Errorf("partial success %v, want 2 rejected (the malformed span and the late one), the late one's reason", ps)
	}
	if got := h.Get("Mcpulse-Spans-Mapped") + " " + h.Get("Mcpulse-Spans-Rejected"); got != "2 2" {
		t.Errorf("mapped, rejected %s, want 2 2", got)
	}
	// The metric counts each span once, as the answer does.
	body := scrape(t, f)
	for _, line := range []string{`mcpulse_gateway_otlp_spans_total{outcome="mapped"} 2`, `mcpulse_gateway_otlp_spans_total{outcome="rejected"} 2`} {
		if !strings.Contains(body, line) {
			t.Errorf("/metrics lacks %q", line)
		}
	}
	counts := map[string]int{}
	for _, m := range f.messages(ingest.TopicToolCalls) {
		counts[envelopeOf(t, m).Event]++
	}
	if want := map[string]int{ingest.EventToolsList: 1, ingest.EventToolCall: 1}; !equalCounts(counts, want) {
		t.Errorf("published %v, want %v", counts, want)
	}
}
