// Package live runs real MCP servers, built with the official Go SDK, and the official Go MCP
// client against them, with the tool lists real servers have: a different tool set per
// session, a paginated tools/list and a tool removed at run time (a list_changed re-list).
// Each server reports through one of the two ways mcpulse ingests: PostHog events through the
// gateway's capture API (posthog-go, with the properties the MCP analytics SDK @posthog/mcp
// sends), or OpenTelemetry spans following the MCP semantic conventions, exported by the
// OpenTelemetry Go SDK's OTLP/HTTP exporter to the gateway's /v1/traces. The calls are
// scripted, so what the pipeline must derive from them (calls, errors by kind, ignored keys,
// unknown tools) is known exactly: `mcpulse demo` checks it (Run, Observe).
package live

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Plans: a session's tool set follows the plan its client asks for (the X-Radar-Plan header),
// as a per-user feature flag would choose it.
const (
	planBasic = "basic"
	planBeta  = "beta"
	// planHeader carries the plan of a session's requests.
	planHeader = "X-Radar-Plan"
)

// The servers' tools. search_signals and beta_radar declare no additionalProperties, so the
// server drops an undeclared key silently (an ignored key); beta_radar's depth is declared on
// the beta plan only; legacy_export is removed at run time; flaky_sync fails as a tool error.
const (
	toolSearch  = "search_signals"
	toolRadar   = "beta_radar"
	toolExport  = "legacy_export"
	toolFlaky   = "flaky_sync"
	pageSizePH  = 2 // the PostHog-reporting server pages its tools/list two tools at a time
	schemaBasic = `{"type":"object","properties":{"area":{"type":"string","description":"Region to scan."}},"required":["area"]}`
	schemaBeta  = `{"type":"object","properties":{"area":{"type":"string","description":"Region to scan."},"depth":{"type":"integer","description":"Scan depth, 1 to 5."}},"required":["area"]}`
)

var toolSchemas = map[string]string{
	toolSearch: `{"type":"object","properties":{"query":{"type":"string","description":"Words to search for."},"limit":{"type":"integer","description":"At most this many signals."}},"required":["query"]}`,
	toolExport: `{"type":"object","properties":{"format":{"type":"string","enum":["csv","json"],"description":"File format."}},"required":["format"]}`,
	toolFlaky:  `{"type":"object","properties":{"target":{"type":"string","description":"What to sync."}}}`,
}

// textResult is a tool's plain answer.
func textResult(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

// newServer builds the radar server of one plan: its tools, each validated against its input
// schema by the SDK before the handler runs (a refusal is the SDK's own validation error).
func newServer(name, version, plan string, pageSize int) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: name, Version: version}, &mcp.ServerOptions{PageSize: pageSize})
	radar := schemaBasic
	if plan == planBeta {
		radar = schemaBeta
	}
	add := func(tool, schema, desc string, h func(args map[string]any) (*mcp.CallToolResult, error)) {
		mcp.AddTool(s, &mcp.Tool{Name: tool, Description: desc, InputSchema: json.RawMessage(schema)},
			func(_ context.Context, _ *mcp.CallToolRequest, args map[string]any) (*mcp.CallToolResult, any, error) {
				res, err := h(args)
				return res, nil, err
			})
	}
	add(toolSearch, toolSchemas[toolSearch], "Searches the radar's signals.", func(args map[string]any) (*mcp.CallToolResult, error) {
		return textResult(fmt.Sprintf("3 signals match %q", args["query"])), nil
	})
	add(toolRadar, radar, "Scans an area with the beta radar.", func(args map[string]any) (*mcp.CallToolResult, error) {
		return textResult(fmt.Sprintf("area %v: clear", args["area"])), nil
	})
	add(toolExport, toolSchemas[toolExport], "Exports the signals (deprecated).", func(args map[string]any) (*mcp.CallToolResult, error) {
		return textResult("exported as " + fmt.Sprint(args["format"])), nil
	})
	add(toolFlaky, toolSchemas[toolFlaky], "Syncs a target with the upstream store.", func(map[string]any) (*mcp.CallToolResult, error) {
		res := textResult("upstream store unavailable")
		res.IsError = true
		return res, nil
	})
	return s
}

// handler serves one server per plan over Streamable HTTP (stateful): a session gets the
// server of the plan its requests carry. It returns the servers too, by plan, for the
// scripted removal.
func handler(name, version string, pageSize int, instrument func(*mcp.Server)) (http.Handler, map[string]*mcp.Server) {
	servers := map[string]*mcp.Server{}
	for _, plan := range []string{planBasic, planBeta} {
		s := newServer(name, version, plan, pageSize)
		instrument(s)
		servers[plan] = s
	}
	return mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		if strings.EqualFold(r.Header.Get(planHeader), planBeta) {
			return servers[planBeta]
		}
		return servers[planBasic]
	}, nil), servers
}
