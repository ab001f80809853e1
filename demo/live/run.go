package live

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/posthog/posthog-go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// The live servers, as their events name them ($mcp_server_name, or the spans' service.name).
const (
	// ServerPrefix starts both servers' names (sql/queries/outcome_live_servers.sql reads them by it).
	ServerPrefix = "radar-"
	// ServerPostHog reports PostHog events through the gateway's capture API; its tools/list
	// comes in pages of two tools.
	ServerPostHog = "radar-posthog"
	// ServerOTel reports OpenTelemetry spans to the gateway's /v1/traces, and nothing else.
	ServerOTel = "radar-otel"
	// ServerVersion is both servers' version.
	ServerVersion = "2.3.0"
	// clientName is the MCP client's name in its initialize handshake.
	clientName = "radar-agent"
)

// Servers are the live servers' names, in order.
var Servers = []string{ServerPostHog, ServerOTel}

// Config configures Run.
type Config struct {
	// GatewayURL is the gateway's base URL (http://127.0.0.1:PORT). Required.
	GatewayURL string
	// APIKey is a project API key the gateway accepts. Required.
	APIKey string
	// Logger receives the clients' logs. Default: discard.
	Logger *slog.Logger
}

// Figure is what the pipeline must hold for one tool of one live server, summed over hours,
// clients and sessions (v_tool_call_stats_hourly), with the distinct ignored key paths its
// calls were found to send (tool_calls.counted_ignored_keys).
type Figure struct {
	Server               string   `json:"server"`
	Tool                 string   `json:"tool"`
	Calls                int64    `json:"calls"`
	Errors               int64    `json:"errors"`
	ValidationErrors     int64    `json:"validation_errors"`
	UnknownToolCalls     int64    `json:"unknown_tool_calls"`
	MeasurableCalls      int64    `json:"measurable_calls"`
	CallsWithIgnoredKeys int64    `json:"calls_with_ignored_keys"`
	IgnoredKeys          []string `json:"ignored_keys"`
}

// expect is one scripted call's outcome: what it adds to its tool's figure.
type expect int

const (
	ok         expect = iota // a successful call whose keys are all declared
	ignoredKey               // a successful call sending one undeclared key
	validation               // refused by the server's input validation
	unknown                  // a tool the session's listing lacks at the time of the call
	toolError                // the tool's own failure
)

// step is one scripted tool call.
type step struct {
	tool string
	args map[string]any
	want expect
	key  string // the ignored key of an ignoredKey call
}

// The script. The basic session lists its tools in pages, calls, sees legacy_export removed
// (a list_changed re-list) and calls it again; the beta session's schema of beta_radar
// declares depth, the basic session's does not.
var (
	basicBefore = []step{
		{toolSearch, map[string]any{"query": "latency"}, ok, ""},
		{toolSearch, map[string]any{"query": "errors", "limit": 5, "sort": "desc"}, ignoredKey, "sort"},
		{toolRadar, map[string]any{"area": "eu-west", "depth": 3}, ignoredKey, "depth"},
		{toolSearch, map[string]any{"query": "spikes", "limit": "ten"}, validation, ""},
		{toolExport, map[string]any{"format": "csv"}, ok, ""},
		{"search_signal", map[string]any{"query": "cpu"}, unknown, ""},
		{toolFlaky, map[string]any{"target": "crm"}, toolError, ""},
	}
	basicAfterRemoval = []step{
		{toolExport, map[string]any{"format": "json"}, unknown, ""},
	}
	beta = []step{
		{toolRadar, map[string]any{"area": "us-east", "depth": 2}, ok, ""},
		{toolSearch, map[string]any{"query": "traffic", "limit": 1}, ok, ""},
	}
)

// Run serves both live servers on loopback, drives a basic and a beta session against each
// with the official Go MCP client, flushes what the servers reported to the gateway, and
// returns the figures the pipeline must derive from it, sorted by server and tool. An error
// means a server, a client or a report failed (a call's expected failure is not one).
func Run(ctx context.Context, cfg Config) ([]Figure, error) {
	if cfg.GatewayURL == "" || cfg.APIKey == "" {
		return nil, errors.New("live: a gateway URL and an API key are required")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}

	ph, err := posthog.NewWithConfig(cfg.APIKey, posthog.Config{Endpoint: cfg.GatewayURL, Interval: 200 * time.Millisecond, Logger: posthog.StdLogger(slog.NewLogLogger(log.Handler(), slog.LevelInfo))})
	if err != nil {
		return nil, fmt.Errorf("live: posthog client: %w", err)
	}
	exporter, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(strings.TrimSuffix(cfg.GatewayURL, "/")+"/v1/traces"),
		otlptracehttp.WithHeaders(map[string]string{"Authorization": "Bearer " + cfg.APIKey}))
	if err != nil {
		ph.Close()
		return nil, fmt.Errorf("live: OTLP exporter: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithResource(resource.NewSchemaless(
		attribute.String("service.name", ServerOTel), attribute.String("service.version", ServerVersion))))

	var figures []Figure
	runErr := func() error {
		for _, srv := range []struct {
			name       string
			pageSize   int
			instrument func(*mcp.Server)
		}{
			{ServerPostHog, pageSizePH, postHogReporter(ph, ServerPostHog, ServerVersion)},
			{ServerOTel, 0, semconvReporter(tp.Tracer("github.com/mcpulse/mcpulse/demo/live"))},
		} {
			f, err := runServer(ctx, srv.name, srv.pageSize, srv.instrument)
			if err != nil {
				return fmt.Errorf("live: %s: %w", srv.name, err)
			}
			figures = append(figures, f...)
		}
		return nil
	}()
	// Close flushes: every report is in the gateway's hands (and so in Kafka) once they return.
	if err := ph.Close(); err != nil && runErr == nil {
		runErr = fmt.Errorf("live: posthog client: %w", err)
	}
	if err := tp.Shutdown(ctx); err != nil && runErr == nil {
		runErr = fmt.Errorf("live: OTLP export: %w", err)
	}
	if runErr != nil {
		return nil, runErr
	}
	return figures, nil
}

// runServer serves one live server, runs the script against it, and returns its expected
// figures.
func runServer(ctx context.Context, name string, pageSize int, instrument func(*mcp.Server)) ([]Figure, error) {
	h, servers := handler(name, ServerVersion, pageSize, instrument)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(ln)
	defer hs.Close()
	url := "http://" + ln.Addr().String()

	acc := map[string]*Figure{}
	add := func(steps []step) {
		for _, s := range steps {
			f := acc[s.tool]
			if f == nil {
				f = &Figure{Server: name, Tool: s.tool, IgnoredKeys: []string{}}
				acc[s.tool] = f
			}
			f.Calls++
			switch s.want {
			case ok:
				f.MeasurableCalls++
			case ignoredKey:
				f.MeasurableCalls++
				f.CallsWithIgnoredKeys++
				if !slices.Contains(f.IgnoredKeys, s.key) {
					f.IgnoredKeys = append(f.IgnoredKeys, s.key)
				}
			case validation:
				f.Errors++
				f.ValidationErrors++
			case unknown:
				f.Errors++
				f.UnknownToolCalls++
			case toolError:
				f.Errors++
			}
		}
	}

	// listThenCall lists every page of the session's tools, then makes the steps' calls.
	listThenCall := func(cs *mcp.ClientSession, steps []step) error {
		if err := listAll(ctx, cs); err != nil {
			return err
		}
		time.Sleep(5 * time.Millisecond) // every call is later than the listing before it
		if err := call(ctx, cs, steps); err != nil {
			return err
		}
		add(steps)
		return nil
	}
	basic, err := connect(ctx, url, planBasic)
	if err != nil {
		return nil, err
	}
	defer basic.Close()
	if err := listThenCall(basic, basicBefore); err != nil {
		return nil, err
	}
	// The server withdraws legacy_export (it tells the session, list_changed); the client
	// lists again, and a later call of the tool is to a tool no longer listed.
	time.Sleep(5 * time.Millisecond) // the re-list is later than every call before it
	servers[planBasic].RemoveTools(toolExport)
	if err := listThenCall(basic, basicAfterRemoval); err != nil {
		return nil, err
	}
	betaSession, err := connect(ctx, url, planBeta)
	if err != nil {
		return nil, err
	}
	defer betaSession.Close()
	if err := listThenCall(betaSession, beta); err != nil {
		return nil, err
	}

	out := make([]Figure, 0, len(acc))
	for _, f := range acc {
		sort.Strings(f.IgnoredKeys)
		out = append(out, *f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Tool < out[j].Tool })
	return out, nil
}

// planTransport sends a session's plan with every request.
type planTransport struct{ plan string }

func (p planTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(planHeader, p.plan)
	return http.DefaultTransport.RoundTrip(r)
}

// connect opens a session of the given plan with the official Go MCP client.
func connect(ctx context.Context, url, plan string) (*mcp.ClientSession, error) {
	c := mcp.NewClient(&mcp.Implementation{Name: clientName, Version: "1.0.0"}, nil)
	return c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: planTransport{plan}}}, nil)
}

// listAll lists every page of the session's tools.
func listAll(ctx context.Context, cs *mcp.ClientSession) error {
	params := &mcp.ListToolsParams{}
	for {
		res, err := cs.ListTools(ctx, params)
		if err != nil {
			return fmt.Errorf("tools/list: %w", err)
		}
		if res.NextCursor == "" {
			return nil
		}
		params = &mcp.ListToolsParams{Cursor: res.NextCursor}
	}
}

// call makes the steps' calls in order; a failed call is expected, a failed transport is not.
func call(ctx context.Context, cs *mcp.ClientSession, steps []step) error {
	for _, s := range steps {
		args, err := json.Marshal(s.args)
		if err != nil {
			return err
		}
		// An unknown tool is a protocol error; every other outcome is a result.
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: s.tool, Arguments: json.RawMessage(args)}); err != nil && s.want != unknown {
			return fmt.Errorf("tools/call %s: %w", s.tool, err)
		}
	}
	return nil
}
