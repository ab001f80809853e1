package demo

import (
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
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/redis/go-redis/v9"

	"github.com/mcpulse/mcpulse/demo/gen"
	"github.com/mcpulse/mcpulse/demo/mcptest"
	"github.com/mcpulse/mcpulse/demo/outcome"
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

// RecordSchemaChecks serves every corpus server over Streamable HTTP on loopback and runs the
// scheduler's schema ratchet job (jobs.SchemaRatchet.RunOnce, which stores each run in
// schema_check_runs and schema_check_tools) once per schemaCheckRuns entry, its clock set to
// that run's start before end. Each corpus server whose tools/list was seen in traffic (the
// consumer stored its snapshots) is then checked from traffic too, at end, as a ratchets.yaml
// traffic: server would be. It returns how many runs it stored.
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
	for _, name := range names {
		// Only servers seen in traffic: a never-seen server would be a failed run.
		src := schemacheck.TrafficSource{ServerName: name}
		if _, err := schemacheck.LoadFromTraffic(ctx, ch, src); errors.Is(err, schemacheck.ErrNoTraffic) {
			continue
		} else if err != nil {
			return stored, fmt.Errorf("demo schema check of %s from traffic: %w", name, err)
		}
		job := &jobs.SchemaRatchet{
			Server:     schemacheck.ServerConfig{Name: name + "-traffic", Traffic: &schemacheck.TrafficConfig{ServerName: name}},
			ClickHouse: ch,
			Now:        func() time.Time { return end },
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

// sealRollups runs the scheduler's rollup seal (jobs.SealIgnoredKeyRates) once at now, as the
// scheduler would within 5 minutes, so the tool-diagnostics panels read the loaded hours as
// sealed counts.
func sealRollups(ctx context.Context, ch driver.Conn, now time.Time) (jobs.SealResult, error) {
	res, err := jobs.SealIgnoredKeyRates(ctx, ch, now)
	if err != nil {
		return res, fmt.Errorf("demo seal: %w", err)
	}
	return res, nil
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
