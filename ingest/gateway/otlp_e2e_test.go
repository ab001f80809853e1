package gateway_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

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

// otlpStack is the gateway, Kafka (kfake), the consumers and ClickHouse of an OTLP test; it
// keeps a copy of every export the gateway received.
type otlpStack struct {
	env *testenv.Env
	srv *httptest.Server

	mu      sync.Mutex
	exports []recordedExport
}

// recordedExport is one POST /v1/traces as received.
type recordedExport struct {
	contentType, encoding string
	body                  []byte
}

func newOTLPStack(t *testing.T) *otlpStack {
	env := testenv.New(t, testenv.Options{})
	gw, err := gateway.New(gateway.Config{APIKeys: []string{testKey}, Brokers: env.Stack.KafkaBrokers}, env.Publisher)
	if err != nil {
		t.Fatal(err)
	}
	s := &otlpStack{env: env}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == gateway.OTLPTracesPath {
			body, _ := io.ReadAll(r.Body)
			s.mu.Lock()
			s.exports = append(s.exports, recordedExport{r.Header.Get("Content-Type"), r.Header.Get("Content-Encoding"), body})
			n := len(s.exports)
			s.mu.Unlock()
			if dir := os.Getenv("MCPULSE_RECORD_OTLP"); dir != "" {
				// Records the exports package otlp's tests and fuzz seeds read
				// (ingest/otlp/testdata/exports, renamed there after the instrumentation).
				ext := ".pb"
				if strings.Contains(r.Header.Get("Content-Type"), "json") {
					ext = ".json"
				}
				if r.Header.Get("Content-Encoding") == "gzip" {
					ext += ".gz"
				}
				name := fmt.Sprintf("%s-%d%s", strings.ToLower(strings.TrimPrefix(t.Name(), "TestOTLP")), n, ext)
				if err := os.WriteFile(filepath.Join(dir, name), body, 0o644); err != nil {
					t.Error(err)
				}
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		gw.Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

// spanDurations decodes every recorded export and returns the duration (ms) of each span by
// the uuid of the tool call the gateway maps it to.
func (s *otlpStack) spanDurations(t *testing.T) map[string]float64 {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]float64{}
	for _, e := range s.exports {
		body := e.body
		if e.encoding == "gzip" {
			zr, err := gzip.NewReader(bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			if body, err = io.ReadAll(zr); err != nil {
				t.Fatal(err)
			}
		}
		enc, err := otlp.EncodingOf(e.contentType)
		if err != nil {
			t.Fatal(err)
		}
		req, err := otlp.Decode(enc, body, 0)
		if err != nil {
			t.Fatalf("a recorded export: %v", err)
		}
		for _, rs := range req.GetResourceSpans() {
			for _, ss := range rs.GetScopeSpans() {
				for _, sp := range ss.GetSpans() {
					out[otlp.EventUUID(sp.GetTraceId(), sp.GetSpanId(), ingest.EventToolCall).String()] = float64(sp.GetEndTimeUnixNano()-sp.GetStartTimeUnixNano()) / 1e6
				}
			}
		}
	}
	return out
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
		ignored_keys, ignored_keys_source, ignored_keys_reason, session_id, ifNull(duration_ms, -1), source
		FROM mcpulse.tool_calls FINAL WHERE server_name = ? ORDER BY timestamp`, server)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []storedCall
	for rows.Next() {
		var c storedCall
		var isErr, unknown uint8
		var source string
		if err := rows.Scan(&c.UUID, &c.Tool, &isErr, &c.ErrorClass, &unknown, &c.Keys, &c.Source, &c.Reason, &c.Session, &c.DurationMs, &source); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(source, "otlp_") {
			t.Errorf("%s %s: source %q: every call of an OpenTelemetry-only server comes from its spans", server, c.Tool, source)
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
	server.AddReceivingMiddleware(otlp.ServerMiddleware(tp.Tracer("mcpulse-test-semconv")))
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

// TestOTLPNodeInstrumentationsEndToEnd runs the real npm instrumentations, unchanged, pinned by
// testdata/otel/package-lock.json: an MCP server on the official TypeScript SDK over
// Streamable HTTP traced by @shinzolabs/instrumentation-mcp, and a client traced by
// @traceloop/instrumentation-mcp (manuallyInstrument), both exporting OTLP/HTTP to the gateway
// and nothing else. The client's spans are recorded under the server its initialize reported
// (otel-fixture-server), the server's under its own service.name (otel-fixture-shinzo). Every
// call must land once with its error class and its span's duration; ignored keys are not
// measured: the client's spans carry the raw arguments but no schema (Traceloop's tools/list
// span has none), and Shinzo saw the arguments after validation.
func TestOTLPNodeInstrumentationsEndToEnd(t *testing.T) {
	s := newOTLPStack(t)
	dir := npmCI(t, "otel", "@traceloop/instrumentation-mcp")
	headers := "OTEL_EXPORTER_OTLP_HEADERS=Authorization=Bearer%20" + testKey // URL-encoded, as the variable is specified
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	server := exec.CommandContext(ctx, "node", "server.js")
	server.Dir = dir
	server.Env = append(os.Environ(), "GATEWAY_URL="+s.srv.URL, headers)
	stdin, err := server.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := server.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var serverErr bytes.Buffer
	server.Stderr = &serverErr
	if err := server.Start(); err != nil {
		t.Fatal(err)
	}
	var listening struct{ URL string }
	line, err := bufio.NewReader(stdout).ReadBytes('\n')
	if err != nil || json.Unmarshal(line, &listening) != nil {
		t.Fatalf("server.js: %q %v\n%s", line, err, serverErr.String())
	}

	client := exec.CommandContext(ctx, "node", "client.js")
	client.Dir = dir
	client.Env = append(os.Environ(), "SERVER_URL="+listening.URL, "OTEL_EXPORTER_OTLP_ENDPOINT="+s.srv.URL, headers)
	out, err := client.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("client.js: %v\n%s", err, ee.Stderr)
		}
		t.Fatal(err)
	}
	var ran struct {
		Calls []struct {
			Tool    string `json:"tool"`
			IsError bool   `json:"is_error"`
			Error   string `json:"error"`
		} `json:"calls"`
	}
	if err := json.Unmarshal(out, &ran); err != nil {
		t.Fatalf("client.js output %q: %v", out, err)
	}
	stdin.Close()
	if err := server.Wait(); err != nil || !strings.Contains(serverErr.String(), "spans flushed") {
		t.Fatalf("server.js: %v\n%s", err, serverErr.String())
	}
	t.Logf("client saw %+v", ran.Calls)
	s.drain(t)

	// What the client saw, as Traceloop's spans say it: every call, its error told apart by
	// the span status's message; arguments raw, but no schema to judge them by.
	noSchema := otlpCall{Source: "not_measurable", Reason: "no_schema"}
	client1 := func(tool string, isErr bool, class string, unknown bool) otlpCall {
		c := noSchema
		c.Tool, c.IsError, c.ErrorClass, c.Unknown = tool, isErr, class, unknown
		return c
	}
	wantClient := []otlpCall{
		client1("lookup", false, "", false),
		client1("lookup", false, "", false),
		client1("lookup", true, "validation_type", false),
		// Shinzo's wrapper swallows the handler's error and returns no result, which the SDK
		// refuses ("Invalid tools/call result"): the client sees that, a tool error all the same.
		client1("explode", true, "other", false),
		client1("ghost", true, "unknown_tool", true),
	}
	// What the server's handlers saw, as Shinzo's spans say it: only the calls that passed
	// validation reached a handler; their arguments were seen after validation.
	validated := otlpCall{Source: "not_measurable", Reason: "arguments_validated"}
	server1 := func(tool string, isErr bool, class string) otlpCall {
		c := validated
		c.Tool, c.IsError, c.ErrorClass = tool, isErr, class
		return c
	}
	wantServer := []otlpCall{server1("lookup", false, ""), server1("lookup", false, ""), server1("explode", true, "other")}

	durations := s.spanDurations(t)
	for _, side := range []struct {
		server string
		want   []otlpCall
	}{{"otel-fixture-server", wantClient}, {"otel-fixture-shinzo", wantServer}} {
		got := s.calls(t, side.server)
		var gotCalls []otlpCall
		for _, g := range got {
			gotCalls = append(gotCalls, g.otlpCall)
			d, ok := durations[g.UUID]
			if !ok {
				t.Errorf("%s: row %+v is no span's", side.server, g.otlpCall)
			} else if math.Abs(d-g.DurationMs) > 0.001 {
				t.Errorf("%s %s: duration %.3f ms, the span's %.3f ms", side.server, g.Tool, g.DurationMs, d)
			}
		}
		if !sameCalls(gotCalls, side.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", side.server, gotCalls, side.want)
		}
	}
	var n uint64
	if err := s.env.ClickHouse.QueryRow(ctx, `SELECT count() FROM mcpulse.mcp_initialize_events FINAL WHERE server_name = 'otel-fixture-server' AND client_name = 'otel-fixture-client'`).Scan(&n); err != nil || n != 1 {
		t.Errorf("initialize events: %d (%v), want 1", n, err)
	}
	if err := s.env.ClickHouse.QueryRow(ctx, `SELECT count() FROM mcpulse.dead_letters`).Scan(&n); err != nil || n != 0 {
		t.Errorf("dead letters: %d (%v), want 0", n, err)
	}
	checkToolDiagnostics(t, s.env.ClickHouse, append(append([]otlpCall(nil), wantClient...), wantServer...))
}

// sameCalls compares two lists of calls in any order.
func sameCalls(a, b []otlpCall) bool {
	if len(a) != len(b) {
		return false
	}
	used := make([]bool, len(b))
next:
	for _, x := range a {
		for i, y := range b {
			if !used[i] && equalCall(x, y) {
				used[i] = true
				continue next
			}
		}
		return false
	}
	return true
}
