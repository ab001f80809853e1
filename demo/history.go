package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net"
	"net/http"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/redis/go-redis/v9"

	"github.com/mcpulse/mcpulse/demo/gen"
	"github.com/mcpulse/mcpulse/demo/mcptest"
	"github.com/mcpulse/mcpulse/demo/outcome"
	"github.com/mcpulse/mcpulse/ingest"
	"github.com/mcpulse/mcpulse/jobs"
	"github.com/mcpulse/mcpulse/schemacheck"
	"github.com/mcpulse/mcpulse/suppression"
)

// The history the demo leaves after its comparison, so every dashboard panel has data: runs of
// the scheduler's schema ratchet job over the MCP servers whose tools the generator calls, and
// a couple of suppression resets through the ops reset path.

// schemaCheckRuns are the demo's schema check runs of every server, oldest first: when each
// started (before the corpus end) and the ratchets it checked against, tightened over time as
// a team would once a baseline improved.
var schemaCheckRuns = []struct {
	before       time.Duration
	maxOversized int
	minCoverage  float64
}{
	{42 * time.Hour, 4, 0.30},
	{30 * time.Hour, 3, 0.40},
	{18 * time.Hour, 2, 0.50},
	{6 * time.Hour, 2, 0.55},
}

// servedTool is one tool as a demo MCP server lists it; InputSchema is the corpus file's raw
// JSON, so the check measures the bytes the real server serves.
type servedTool = mcptest.Tool

// corpusServers reads the generator's embedded tool schemas (gen.ToolSchemaFiles) into one tool
// list per MCP server: github-mcp-server's snapshots and PostHog's schemas (the tools the
// generator calls), and Sentry's and Kubernetes' whole published tool lists. PostHog's retired
// standalone server is left out (its files hold no tool list of their own).
func corpusServers() (map[string][]servedTool, error) {
	files := gen.ToolSchemaFiles()
	names, err := fs.Glob(files, "*__*")
	if err != nil {
		return nil, err
	}
	out := map[string][]servedTool{}
	add := func(server string, t servedTool) {
		for _, have := range out[server] {
			if have.Name == t.Name {
				return // a tool in two toolsets is served once
			}
		}
		out[server] = append(out[server], t)
	}
	for _, name := range names {
		server, file, _ := strings.Cut(name, "__")
		if server == "posthog-mcp-standalone" {
			continue
		}
		data, err := fs.ReadFile(files, name)
		if err != nil {
			return nil, err
		}
		switch {
		case path.Ext(file) == ".snap" || file == "exec-tool.json": // one tool object
			var t servedTool
			if err := json.Unmarshal(data, &t); err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			add(server, t)
		case server == "posthog": // a bare input schema named after its tool
			add(server, servedTool{Name: strings.TrimSuffix(file, ".json"), InputSchema: data})
		default: // a published tool list
			var list []servedTool
			if err := json.Unmarshal(data, &list); err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			for _, t := range list {
				add(server, t)
			}
		}
	}
	return out, nil
}

// servedVersions are the versions of each demo server seen in traffic, oldest first: an older
// one that listed all but its last tools, and the current one.
var servedVersions = []struct {
	version  string
	before   time.Duration // how long before the corpus end its tools/list was seen
	withheld int           // tools the version did not list yet
}{
	{"0.9.0", 40 * time.Hour, 3},
	{"1.0.0", 3 * time.Hour, 0},
}

// virtualTools are the tools the MCP analytics SDK appends to a server's tools/list when its
// reportMissing and collectFeedback options are on (@posthog/mcp 0.16.3 src/extensions/tools.ts
// getReportMissingToolDescriptor, feedback.ts getFeedbackToolDescriptor: names and input
// schemas as the SDK builds them, descriptions shortened). Agents' calls of them arrive as
// $mcp_missing_capability and $mcp_feedback, not as tool calls.
var virtualTools = []servedTool{
	{Name: gen.VirtualToolGetMoreTools, Description: "Check for additional tools whenever your task might benefit from specialized capabilities.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"context":{"type":"string","description":"A description of your goal and what kind of tool would help accomplish it."}},"required":["context"]}`)},
	{Name: gen.VirtualToolSendFeedback, Description: "Send feedback about this server to its developers.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"feedback_type":{"type":"string","enum":["missing_capability","issue","praise","other"],"description":"What kind of feedback this is."},"summary":{"type":"string","description":"One self-contained sentence."},"details":{"type":"string","description":"Optional longer context."},"friction_points":{"type":"string","description":"Optional: the moments that slowed you down."},"suggested_improvement":{"type":"string","description":"Optional: the change that would have helped."},"tool_name":{"type":"string","description":"Optional: the existing tool this feedback is about."},"sentiment":{"type":"string","enum":["positive","neutral","negative","mixed"],"description":"Optional: how the experience felt overall."},"task_completed":{"type":"boolean","description":"Optional: whether you still completed the user's task."}},"required":["feedback_type","summary"]}`)},
}

// servedPage is how many tools one tools/list page lists: the SDK sends one $mcp_tools_list
// event per page it captures.
const servedPage = 10

// PublishServedSchemas publishes, for every corpus server, the $mcp_tools_list events its
// PostHog MCP analytics SDK would have sent for each servedVersions entry: every tool's schema
// as served (the SDK's context parameter injected), a page of servedPage tools per event. The
// consumer stores them in served_tool_schemas, so the schema ratchet dashboard shows the
// schemas seen in traffic and RecordSchemaChecks checks them from traffic. Event uuids are
// derived from the server, version and page, so publishing twice stores nothing twice. It
// returns how many events it published.
func PublishServedSchemas(ctx context.Context, pub *ingest.Publisher, end time.Time) (int, error) {
	servers, err := corpusServers()
	if err != nil {
		return 0, fmt.Errorf("demo served schemas: %w", err)
	}
	var lines bytes.Buffer
	enc := json.NewEncoder(&lines)
	enc.SetEscapeHTML(false)
	for _, name := range slices.Sorted(maps.Keys(servers)) {
		tools := servers[name]
		for _, v := range servedVersions {
			listed := tools[:max(len(tools)-v.withheld, 1)]
			if name == gen.ReportsServer {
				// Its SDK appends the virtual tools to every listing, after the server's own.
				listed = append(slices.Clip(listed), virtualTools...)
			}
			for page := 0; page*servedPage < len(listed); page++ {
				chunk := listed[page*servedPage : min((page+1)*servedPage, len(listed))]
				type servedEntry struct {
					Name        string          `json:"name"`
					Description string          `json:"description,omitempty"`
					InputSchema json.RawMessage `json:"inputSchema"`
				}
				entries := make([]servedEntry, len(chunk))
				names := make([]string, len(chunk))
				for i, t := range chunk {
					schema, _, err := schemacheck.InjectContext(t.InputSchema, "")
					if err != nil {
						schema = t.InputSchema // served as it is: not JSON to inject into
					}
					entries[i] = servedEntry{Name: t.Name, Description: t.Description, InputSchema: schema}
					names[i] = t.Name
				}
				at := end.Add(-v.before + time.Duration(page)*time.Second)
				event := map[string]any{
					"uuid":        uuid.NewSHA1(uuid.NameSpaceURL, []byte(fmt.Sprintf("mcpulse-demo/tools-list/%s/%s/%d", name, v.version, page))).String(),
					"event":       "$mcp_tools_list",
					"distinct_id": "ses_demo_" + name,
					"timestamp":   at.UTC().Format(time.RFC3339Nano),
					"properties": map[string]any{
						"$mcp_source":            "posthog_mcp_analytics",
						"$session_id":            "ses_demo_" + name,
						"$mcp_server_name":       name,
						"$mcp_server_version":    v.version,
						"$mcp_client_name":       "claude-code",
						"$mcp_protocol_version":  "2025-11-25",
						"$mcp_is_error":          false,
						"$mcp_listed_tool_names": names,
						"$mcp_response":          map[string]any{"tools": entries},
					},
				}
				if err := enc.Encode(event); err != nil {
					return 0, err
				}
			}
		}
	}
	stats, err := ingest.PublishFile(ctx, pub, &lines, "demo-tools-lists.jsonl", nil)
	if err != nil {
		return stats.Published, fmt.Errorf("demo served schemas: %w", err)
	}
	if stats.DeadLettered > 0 {
		return stats.Published, fmt.Errorf("demo served schemas: %d tools/list events dead-lettered", stats.DeadLettered)
	}
	return stats.Published, nil
}

// RecordSchemaChecks serves every corpus server over Streamable HTTP on loopback and runs the
// scheduler's schema ratchet job (jobs.SchemaRatchet.RunOnce, which stores each run in
// schema_check_runs and schema_check_tools) once per schemaCheckRuns entry, its clock set to
// that run's start before end. Each corpus server whose tools/list was seen in traffic (the
// consumer stored its snapshots, see PublishServedSchemas) is then checked from traffic too, as
// a ratchets.yaml traffic: server named "<server>-traffic" would be. It returns how many runs
// it stored.
func RecordSchemaChecks(ctx context.Context, ch driver.Conn, end time.Time) (int, error) {
	servers, err := corpusServers()
	if err != nil {
		return 0, fmt.Errorf("demo schema checks: %w", err)
	}
	mux := http.NewServeMux()
	for name, tools := range servers {
		srv := mcptest.NewServer(tools, 0).Server
		mux.Handle("/"+name+"/mcp", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	httpServer := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- httpServer.Serve(ln) }()
	defer func() {
		_ = httpServer.Close()
		<-served
	}()

	names := slices.Sorted(maps.Keys(servers))
	stored := 0
	for _, r := range schemaCheckRuns {
		for i, name := range names {
			maxOversized, minCoverage := r.maxOversized, r.minCoverage
			// Each server's run starts a few seconds after the previous server's, as a scheduler
			// working through its list would.
			startedAt := end.Add(-r.before + time.Duration(i)*7*time.Second)
			began := time.Now()
			job := &jobs.SchemaRatchet{
				Server: schemacheck.ServerConfig{
					Name: name, URL: "http://" + ln.Addr().String() + "/" + name + "/mcp",
					MaxOversized: &maxOversized, MinNestedCoverage: &minCoverage,
					// Every corpus server is the same stand-in (serverInfo mcptest-corpus 1):
					// stored, their listings would mix under that one name. The demo's served
					// schemas come from its traffic (PublishServedSchemas).
					StoreServedSchemas: new(false),
				},
				ClickHouse: ch,
				Now:        func() time.Time { return startedAt.Add(time.Since(began)) },
				Timeout:    time.Minute,
			}
			run, err := job.RunOnce(ctx)
			if err != nil {
				return stored, fmt.Errorf("demo schema check of %s: %w", name, err)
			}
			if run.Err != nil {
				return stored, fmt.Errorf("demo schema check of %s could not list its tools: %w", name, run.Err)
			}
			stored++
		}
	}
	// From traffic, against the latest ratchets, between the last two listing runs (so each
	// tool's latest check stays the listing's).
	latest := schemaCheckRuns[len(schemaCheckRuns)-1]
	trafficAt := end.Add(-(schemaCheckRuns[len(schemaCheckRuns)-2].before + latest.before) / 2)
	for i, name := range names {
		// Only servers seen in traffic: a never-seen server would be a failed run.
		src := schemacheck.TrafficSource{ServerName: name}
		if _, err := schemacheck.LoadFromTraffic(ctx, ch, src); errors.Is(err, schemacheck.ErrNoTraffic) {
			continue
		} else if err != nil {
			return stored, fmt.Errorf("demo schema check of %s from traffic: %w", name, err)
		}
		maxOversized, minCoverage := latest.maxOversized, latest.minCoverage
		job := &jobs.SchemaRatchet{
			Server: schemacheck.ServerConfig{Name: name + "-traffic", Traffic: &schemacheck.TrafficConfig{ServerName: name},
				MaxOversized: &maxOversized, MinNestedCoverage: &minCoverage},
			ClickHouse: ch,
			Now:        func() time.Time { return trafficAt.Add(time.Duration(i) * 7 * time.Second) },
			Timeout:    time.Minute,
		}
		run, err := job.RunOnce(ctx)
		if err != nil {
			return stored, fmt.Errorf("demo schema check of %s from traffic: %w", name, err)
		}
		if run.Err != nil {
			return stored, fmt.Errorf("demo schema check of %s from traffic: %w", name, run.Err)
		}
		stored++
	}
	return stored, nil
}

// resetReason is the reason the demo's resets are audited with.
const resetReason = "demo: the person asked to be invited again"

// resetSomeIdentities resets, through the ops reset path (suppression.Reset: Redis script, then
// an audit event on mcpulse_audit that the running consumers store in suppression_audit), the
// first declined identity and the first live cooldown of the expected outcome (by identity
// hash), then waits until suppression_audit holds both. It returns the hashes reset.
func resetSomeIdentities(ctx context.Context, ch driver.Conn, rdb redis.UniversalClient, pub suppression.ResetPublisher, expected *outcome.Outcome, now time.Time) ([]string, error) {
	var picked []string
	for _, want := range []string{suppression.StateDeclined, suppression.StateCooldown} {
		for _, h := range slices.Sorted(maps.Keys(expected.Suppression)) {
			rec := expected.Suppression[h]
			if rec.Response != want {
				continue
			}
			if exp, err := time.Parse(time.RFC3339Nano, rec.ExpiresAt); want == suppression.StateCooldown && (err != nil || !exp.After(now)) {
				continue
			}
			picked = append(picked, h)
			break
		}
	}
	if len(picked) == 0 {
		return nil, nil
	}
	for _, h := range picked {
		// By distinct_id and instance URL, as ops would, so the audit names the person.
		var distinctID, instanceURL string
		if err := ch.QueryRow(ctx, `SELECT any(distinct_id), any(instance_url) FROM mcpulse.recruitment_events WHERE identity_hash = ?`,
			h).Scan(&distinctID, &instanceURL); err != nil {
			return nil, fmt.Errorf("demo reset of %s: %w", h, err)
		}
		rep, err := suppression.Reset(ctx, suppression.ResetOptions{
			Redis: rdb, ClickHouse: ch, Publisher: pub, DistinctID: distinctID, InstanceURL: instanceURL,
			Actor: "mcpulse demo", Reason: resetReason,
		})
		if err != nil {
			return nil, fmt.Errorf("demo reset of %s: %w", h, err)
		}
		if rep.IdentityHash != h {
			return nil, fmt.Errorf("BUG: demo reset of %s (distinct_id %q, instance %q) reset identity %s", h, distinctID, instanceURL, rep.IdentityHash)
		}
	}
	// The consumers store the audit events asynchronously.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var n uint64
		if err := ch.QueryRow(ctx, `SELECT count() FROM mcpulse.suppression_audit FINAL WHERE has(?, identity_hash) AND reason = ?`,
			picked, resetReason).Scan(&n); err != nil {
			return nil, err
		}
		if n >= uint64(len(picked)) {
			return picked, nil
		}
		if time.Now().After(deadline) {
			return nil, errors.New("demo resets: the consumers did not store the audit events within 2 minutes")
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
