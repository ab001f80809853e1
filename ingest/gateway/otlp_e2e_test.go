package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpulse/mcpulse/consumers"
	"github.com/mcpulse/mcpulse/dashboards"
	"github.com/mcpulse/mcpulse/ingest"
	"github.com/mcpulse/mcpulse/ingest/gateway"
	"github.com/mcpulse/mcpulse/ingest/otlp"
	"github.com/mcpulse/mcpulse/testkit/testenv"
)

// otlpCall is what one tool call must produce in tool_calls.
type otlpCall struct {
	Tool       string
	IsError    bool
	ErrorClass string // misuse.ErrorClass: validation_*, unknown_tool, other, or ""
	Unknown    bool   // unknown_tool
	Keys       []string
	Source     string // ignored_keys_source
	Reason     string // ignored_keys_reason
}

// otlpStack is the gateway, Kafka (kfake), the consumers and ClickHouse of an OTLP test.
type otlpStack struct {
	env *testenv.Env
	srv *httptest.Server
}

func newOTLPStack(t *testing.T) *otlpStack {
	env := testenv.New(t, testenv.Options{})
	gw, err := gateway.New(gateway.Config{APIKeys: []string{testKey}, Brokers: env.Stack.KafkaBrokers}, env.Publisher)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw.Handler())
	t.Cleanup(srv.Close)
	return &otlpStack{env: env, srv: srv}
}

// drain runs the consumers until every published event is stored.
func (s *otlpStack) drain(t *testing.T) {
	t.Helper()
	c, err := consumers.New(consumers.Config{
		Brokers: s.env.Stack.KafkaBrokers, Redis: s.env.Redis, ClickHouse: s.env.ClickHouse, DeadLetters: s.env.Publisher,
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
}

// storedCall is a tool_calls row of an OTLP test.
type storedCall struct {
	otlpCall
	UUID       string
	Session    string
	DurationMs float64
}

func (s *otlpStack) calls(t *testing.T, server string) []storedCall {
	t.Helper()
	rows, err := s.env.ClickHouse.Query(context.Background(), `SELECT toString(uuid), tool_name, is_error, error_class, unknown_tool,
		ignored_keys, ignored_keys_source, ignored_keys_reason, session_id, ifNull(duration_ms, -1)
		FROM mcpulse.tool_calls FINAL WHERE server_name = ? ORDER BY timestamp`, server)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []storedCall
	for rows.Next() {
		var c storedCall
		var isErr, unknown uint8
		if err := rows.Scan(&c.UUID, &c.Tool, &isErr, &c.ErrorClass, &unknown, &c.Keys, &c.Source, &c.Reason, &c.Session, &c.DurationMs); err != nil {
			t.Fatal(err)
		}
		c.IsError, c.Unknown = isErr == 1, unknown == 1
		if len(c.Keys) == 0 {
			c.Keys = nil
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// checkToolDiagnostics checks the Tool diagnostics "Every tool" panel for the tools of want:
// calls, error rate, validation-error rate, unknown-tool calls, ignored-key rate ("not
// measured" where no call was measurable) and a p95 duration.
func checkToolDiagnostics(t *testing.T, ch driver.Conn, want []otlpCall) {
	t.Helper()
	type stats struct{ calls, errors, validation, unknown, successful, measurable, withIgnored int }
	by := map[string]*stats{}
	for _, c := range want {
		s := by[c.Tool]
		if s == nil {
			s = &stats{}
			by[c.Tool] = s
		}
		s.calls++
		if c.IsError {
			s.errors++
		} else {
			s.successful++
			if c.Source != "not_measurable" {
				s.measurable++
				if len(c.Keys) > 0 {
					s.withIgnored++
				}
			}
		}
		if strings.HasPrefix(c.ErrorClass, "validation_") {
			s.validation++
		}
		if c.Unknown {
			s.unknown++
		}
	}
	rows := map[string]map[string]any{}
	for _, row := range panelRows(runPanel(t, ch, "tool-diagnostics", "tools", dashboards.Filters{MinCalls: 1, Limit: dashboards.MaxLimit})) {
		rows[row["tool_name"].(string)] = row
	}
	for tool, s := range by {
		row := rows[tool]
		if row == nil {
			t.Errorf("Tool diagnostics: no row for %s", tool)
			continue
		}
		rate := "not measured"
		if s.measurable > 0 {
			rate = fmt.Sprintf("%.4f", float64(s.withIgnored)/float64(s.measurable))
		}
		wantShown := fmt.Sprintf("calls %d, error rate %.4f, validation-error rate %.4f, unknown %d, ignored-key rate %s",
			s.calls, float64(s.errors)/float64(s.calls), float64(s.validation)/float64(s.calls), s.unknown, rate)
		gotRate := "not measured"
		if r, ok := row["ignored_key_rate"].(float64); ok {
			gotRate = fmt.Sprintf("%.4f", r)
		}
		shown := fmt.Sprintf("calls %v, error rate %.4f, validation-error rate %.4f, unknown %v, ignored-key rate %s",
			row["calls"], row["error_rate"], row["validation_error_rate"], row["unknown_tool_calls"], gotRate)
		if shown != wantShown {
			t.Errorf("Tool diagnostics, %s:\n got %s\nwant %s", tool, shown, wantShown)
		}
		if p95, ok := row["p95_ms"].(float64); !ok || p95 <= 0 {
			t.Errorf("Tool diagnostics, %s: p95 %v, want a duration", tool, row["p95_ms"])
		}
	}
}

// semconvMiddleware is a server instrumentation following the OpenTelemetry semantic
// conventions for MCP, as the MCP Python SDK v2 emits them: a SERVER span per request named
// "{mcp.method.name} {target}", mcp.session.id, mcp.protocol.version, gen_ai.tool.name,
// gen_ai.operation.name, the opt-in gen_ai.tool.call.arguments, error.type (tool_error for an
// isError result, the JSON-RPC code for an error response) and rpc.response.status_code; the
// tools/list span carries gen_ai.tool.definitions.
func semconvMiddleware(tracer trace.Tracer) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			name := method
			attrs := []attribute.KeyValue{attribute.String("mcp.method.name", method)}
			if ss, ok := req.GetSession().(*mcp.ServerSession); ok && ss.ID() != "" {
				attrs = append(attrs, attribute.String("mcp.session.id", ss.ID()))
				if ip := ss.InitializeParams(); ip != nil {
					attrs = append(attrs, attribute.String("mcp.protocol.version", ip.ProtocolVersion))
				}
			}
			if p, ok := req.GetParams().(*mcp.CallToolParamsRaw); ok {
				name += " " + p.Name
				attrs = append(attrs, attribute.String("gen_ai.tool.name", p.Name), attribute.String("gen_ai.operation.name", "execute_tool"),
					attribute.String("gen_ai.tool.call.arguments", string(p.Arguments)))
			}
			ctx, span := tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
			defer span.End()
			res, err := next(ctx, method, req)
			var werr *jsonrpc.Error
			switch {
			case errors.As(err, &werr):
				code := strconv.FormatInt(werr.Code, 10)
				span.SetAttributes(attribute.String("error.type", code), attribute.String("rpc.response.status_code", code))
				span.SetStatus(codes.Error, werr.Message)
			case err != nil:
				span.SetAttributes(attribute.String("error.type", "_OTHER"))
				span.SetStatus(codes.Error, err.Error())
			}
			switch r := res.(type) {
			case *mcp.CallToolResult:
				if r != nil && r.IsError {
					msg := ""
					if len(r.Content) > 0 {
						if tc, ok := r.Content[0].(*mcp.TextContent); ok {
							msg = tc.Text
						}
					}
					span.SetAttributes(attribute.String("error.type", "tool_error"))
					span.SetStatus(codes.Error, msg)
				}
			case *mcp.ListToolsResult:
				if r == nil {
					break
				}
				defs, _ := json.Marshal(r.Tools)
				span.SetAttributes(attribute.String("gen_ai.tool.definitions", string(defs)))
			}
			return res, err
		}
	}
}

// TestOTLPGoSemconvServerEndToEnd runs a server on the official Go SDK whose only telemetry is
// semantic-convention spans exported with the OpenTelemetry Go SDK's OTLP/HTTP exporter to
// the gateway (it stands in for the MCP Python SDK v2 and FastMCP), driven by the Go SDK's
// client over Streamable HTTP. Every call must land once in tool_calls with its error class,
// its duration from the span, and its ignored keys judged against the schema its tools/list
// span carried; the server must show in the Tool diagnostics.
func TestOTLPGoSemconvServerEndToEnd(t *testing.T) {
	s := newOTLPStack(t)
	ctx := context.Background()

	memory := tracetest.NewInMemoryExporter()
	exporter, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(s.srv.URL+gateway.OTLPTracesPath),
		otlptracehttp.WithHeaders(map[string]string{"Authorization": "Bearer " + testKey}))
	if err != nil {
		t.Fatal(err)
	}
	const serverName, serverVersion = "go-semconv-weather", "2.1.0"
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithSyncer(memory),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", serverName), attribute.String("service.version", serverVersion))))

	server := mcp.NewServer(&mcp.Implementation{Name: serverName, Version: serverVersion}, nil)
	server.AddReceivingMiddleware(semconvMiddleware(tp.Tracer("mcpulse-test-semconv")))
	forecastSchema := json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}},"required":["city"]}`)
	mcp.AddTool(server, &mcp.Tool{Name: "go_forecast", Description: "Weather forecast for a city.", InputSchema: forecastSchema},
		func(_ context.Context, _ *mcp.CallToolRequest, in map[string]any) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("sunny in %v", in["city"])}}}, nil, nil
		})
	mcp.AddTool(server, &mcp.Tool{Name: "go_explode", Description: "Always fails.", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest, map[string]any) (*mcp.CallToolResult, any, error) {
			return nil, nil, errors.New("the forecast service is down")
		})
	mcpSrv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
	defer mcpSrv.Close()

	client := mcp.NewClient(&mcp.Implementation{Name: "go-semconv-client", Version: "0.1.0"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: mcpSrv.URL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Fatal(err)
	}
	calls := []struct {
		tool string
		args map[string]any
		want otlpCall
	}{
		{"go_forecast", map[string]any{"city": "Oslo"}, otlpCall{Source: "schema"}},
		{"go_forecast", map[string]any{"city": "Oslo", "days": 3, "units": "metric"}, otlpCall{Keys: []string{"units"}, Source: "schema"}},
		{"go_forecast", map[string]any{"city": 5}, otlpCall{IsError: true, ErrorClass: "validation_type", Source: "schema"}},
		{"go_forecast", map[string]any{"days": 2}, otlpCall{IsError: true, ErrorClass: "validation_required", Source: "schema"}},
		{"go_explode", map[string]any{"why": "test"}, otlpCall{IsError: true, ErrorClass: "other", Source: "schema"}},
		// No schema lists it: not measured, and counted as a call to an unlisted tool.
		{"go_nope", map[string]any{}, otlpCall{IsError: true, ErrorClass: "unknown_tool", Unknown: true, Source: "not_measurable", Reason: "no_schema"}},
	}
	var want []otlpCall
	for _, c := range calls {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: c.tool, Arguments: c.args})
		if (err != nil) != (c.tool == "go_nope") {
			t.Fatalf("%s %v: %v", c.tool, c.args, err)
		}
		w := c.want
		w.Tool = c.tool
		want = append(want, w)
	}
	sessionID := cs.ID()
	if err := cs.Close(); err != nil {
		t.Fatal(err)
	}
	if err := tp.ForceFlush(ctx); err != nil { // exports the batch to the gateway
		t.Fatal(err)
	}
	// The spans as the exporter sent them: the uuid, call and duration of each row.
	type spanCall struct {
		call     int
		duration float64
	}
	byUUID := map[string]spanCall{}
	for _, sp := range memory.GetSpans().Snapshots() {
		tool, args := "", ""
		for _, a := range sp.Attributes() {
			switch a.Key {
			case "gen_ai.tool.name":
				tool = a.Value.AsString()
			case "gen_ai.tool.call.arguments":
				args = a.Value.AsString()
			}
		}
		for i, c := range calls {
			if b, _ := json.Marshal(c.args); c.tool == tool && string(b) == args {
				tid, sid := sp.SpanContext().TraceID(), sp.SpanContext().SpanID()
				byUUID[otlp.EventUUID(tid[:], sid[:], ingest.EventToolCall).String()] = spanCall{i, float64(sp.EndTime().Sub(sp.StartTime())) / 1e6}
			}
		}
	}
	if len(byUUID) != len(calls) {
		t.Fatalf("%d tool-call spans recorded, want %d", len(byUUID), len(calls))
	}
	if err := tp.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	s.drain(t)

	got := s.calls(t, serverName)
	if len(got) != len(want) {
		t.Fatalf("%d tool_calls rows for %s, want %d: %+v", len(got), serverName, len(want), got)
	}
	for _, g := range got {
		sc, ok := byUUID[g.UUID]
		if !ok {
			t.Errorf("row %+v: uuid %s is no span's", g.otlpCall, g.UUID)
			continue
		}
		if w := want[sc.call]; !equalCall(g.otlpCall, w) {
			t.Errorf("call %d:\n got %+v\nwant %+v", sc.call, g.otlpCall, w)
		}
		if math.Abs(sc.duration-g.DurationMs) > 0.001 {
			t.Errorf("call %d: duration %.3f ms, the span's %.3f ms", sc.call, g.DurationMs, sc.duration)
		}
		if g.Session != sessionID {
			t.Errorf("call %d: session %q, want %q", sc.call, g.Session, sessionID)
		}
	}
	var n uint64
	if err := s.env.ClickHouse.QueryRow(ctx, `SELECT count() FROM mcpulse.mcp_initialize_events FINAL WHERE server_name = ? AND session_id = ?`,
		serverName, sessionID).Scan(&n); err != nil || n != 1 {
		t.Errorf("initialize events: %d (%v), want 1", n, err)
	}
	if err := s.env.ClickHouse.QueryRow(ctx, `SELECT count() FROM mcpulse.mcp_exceptions FINAL WHERE server_name = ?`, serverName).Scan(&n); err != nil || n != 4 {
		t.Errorf("exceptions: %d (%v), want 4 (one per failed call)", n, err)
	}
	if err := s.env.ClickHouse.QueryRow(ctx, `SELECT count() FROM mcpulse.dead_letters`).Scan(&n); err != nil || n != 0 {
		t.Errorf("dead letters: %d (%v), want 0", n, err)
	}
	checkToolDiagnostics(t, s.env.ClickHouse, want)
}

func equalCall(a, b otlpCall) bool {
	return a.Tool == b.Tool && a.IsError == b.IsError && a.ErrorClass == b.ErrorClass && a.Unknown == b.Unknown &&
		slices.Equal(a.Keys, b.Keys) && a.Source == b.Source && a.Reason == b.Reason
}
