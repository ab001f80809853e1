package dashboards

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/redis/go-redis/v9"

	"github.com/google/uuid"

	"github.com/mcpulse/mcpulse/consumers"
	"github.com/mcpulse/mcpulse/demo"
	"github.com/mcpulse/mcpulse/demo/outcome"
	"github.com/mcpulse/mcpulse/ingest"
	"github.com/mcpulse/mcpulse/internal/stores"
	"github.com/mcpulse/mcpulse/stack"
)

// demoData is the stack the integration tests share: the demo run once on a small corpus, so
// every panel has generated tool calls, recruitment events, dead letters, schema check runs
// and suppression resets to show. It is started by the first test that needs it and stopped
// by TestMain.
var demoData struct {
	once     sync.Once
	err      error
	dir      string
	stack    *stack.Stack
	ch       driver.Conn
	rdb      redis.UniversalClient
	expected *outcome.Outcome
	end      time.Time // the corpus end: no event is at or after it
}

// demoEvents is the corpus size: enough for every panel to have rows under every filter.
const demoEvents = 8000

func TestMain(m *testing.M) {
	code := m.Run()
	if demoData.ch != nil {
		demoData.ch.Close()
	}
	if demoData.rdb != nil {
		demoData.rdb.Close()
	}
	if demoData.stack != nil {
		if err := demoData.stack.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "devstack: close:", err)
		}
	}
	if demoData.dir != "" {
		os.RemoveAll(demoData.dir)
	}
	os.Exit(code)
}

// withDemoData returns the shared stack, running the demo on first use; a failure fails the
// test (never skips it).
func withDemoData(t *testing.T) {
	t.Helper()
	demoData.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		d := &demoData
		if d.dir, d.err = os.MkdirTemp("", "mcpulse-dashboards-test-"); d.err != nil {
			return
		}
		if d.stack, d.err = stack.Start(ctx, stack.Config{UseEnv: true, DataDir: filepath.Join(d.dir, "stack")}); d.err != nil {
			return
		}
		summary, err := demo.Run(ctx, demo.Config{Events: demoEvents, Seed: 11, DataDir: filepath.Join(d.dir, "demo"), Stack: d.stack})
		if err != nil {
			d.err = err
			return
		}
		if len(summary.Mismatches) > 0 {
			d.err = fmt.Errorf("the demo's stores differ from the expected outcome: %v", summary.Mismatches)
			return
		}
		if d.expected, d.err = outcome.Read(filepath.Join(d.dir, "demo", "events.jsonl.expected.json")); d.err != nil {
			return
		}
		if d.end, d.err = time.Parse(time.RFC3339, d.expected.Corpus.End); d.err != nil {
			return
		}
		if d.ch, d.err = stores.OpenClickHouse(ctx, d.stack.ClickHouseDSN); d.err != nil {
			return
		}
		if d.rdb, d.err = stores.OpenRedis(ctx, d.stack.RedisURL); d.err != nil {
			return
		}
		if d.err = consumeOtherEvents(ctx, d.stack, d.rdb, d.ch, d.end); d.err != nil {
			return
		}
		d.err = insertAlertHistory(ctx, d.ch, d.end)
	})
	if demoData.err != nil {
		t.Fatalf("demo data: %v", demoData.err)
	}
}

// insertAlertHistory records alert transitions and deliveries before end, as the scheduler's
// evaluator (dashboards/alerts, which this package's tests cannot import) records them: the
// dead-letter rate fired and resolved, a ratchet broke and is still broken.
func insertAlertHistory(ctx context.Context, ch driver.Conn, end time.Time) error {
	at := func(d time.Duration) int64 { return end.Add(-d).Unix() }
	if err := ch.Exec(ctx, `INSERT INTO mcpulse.alert_transitions (transition_id, rule, instance, seq, state, previous_id, labels,
value, value_text, volume, summary, at, firing_since, recorded_by)
SELECT id, rule, instance, seq, state, prev, labels, value, value_text, volume, summary, toDateTime(at, 'UTC'), toDateTime(since, 'UTC'), 'test'
FROM (SELECT arrayJoin([
    ('t1', 'dead-letter-rate', '{}', 1, 'firing', '', '', 0.048, '4.8%', 210., 'Dead-letter rate 4.8% over 210 events in the last 1h, above 1%', ?, ?),
    ('t2', 'dead-letter-rate', '{}', 2, 'resolved', 't1', '', 0.004, '0.4%', 500., 'Dead-letter rate 0.4% over 500 events in the last 1h; it fires above 1%', ?, ?),
    ('t3', 'ratchet-broken', '{"server":"posthog"}', 1, 'firing', '', 'server: posthog', 1., 'yes', 1., 'Ratchet broken yes over 1 runs in the last 24h, above 0.5', ?, ?)]) AS r,
  r.1 AS id, r.2 AS rule, r.3 AS instance, toUInt32(r.4) AS seq, r.5 AS state, r.6 AS prev, r.7 AS labels,
  r.8 AS value, r.9 AS value_text, r.10 AS volume, r.11 AS summary, r.12 AS at, r.13 AS since)`,
		at(3*time.Hour), at(3*time.Hour), at(2*time.Hour), at(3*time.Hour), at(time.Hour), at(time.Hour)); err != nil {
		return fmt.Errorf("alert history: %w", err)
	}
	if err := ch.Exec(ctx, `INSERT INTO mcpulse.alert_notifications (transition_id, receiver, status, rule, instance, state, kind, attempts, error, at, sent_by)
SELECT id, receiver, 'sent', rule, '{}', state, kind, 1, '', toDateTime(?, 'UTC'), 'test'
FROM (SELECT arrayJoin([('t1', 'ops-webhook', 'dead-letter-rate', 'firing', 'webhook'), ('t1', 'ops-slack', 'dead-letter-rate', 'firing', 'slack'),
    ('t2', 'ops-webhook', 'dead-letter-rate', 'resolved', 'webhook')]) AS r, r.1 AS id, r.2 AS receiver, r.3 AS rule, r.4 AS state, r.5 AS kind)`,
		at(2*time.Hour)); err != nil {
		return fmt.Errorf("alert notifications: %w", err)
	}
	return nil
}

// otherEventNames are names mcpulse does not route, sent after the demo (the demo's comparison
// with its expected outcome does not count them): 3 $pageview and 1 $screen.
var otherEventNames = []string{"$pageview", "$pageview", "$pageview", "$screen"}

// consumeOtherEvents publishes otherEventNames through the real publisher, an hour before end,
// and consumes them in the demo's consumer group.
// overLimitServer is the MCP server (version 0.9.0) whose listing overLimitListing sends.
const overLimitServer = "wide-schemas-mcp"

// overLimitListing is a tools list the SDK sent at at, one of whose tools declares 1,001
// properties (the consumer's default limit is 1,000), and a call of that tool a second later:
// the call's schema is judged over the limit, for the panels of schemas not measured.
func overLimitListing(at time.Time) ([]*ingest.Event, error) {
	props := map[string]any{}
	for i := range 1001 {
		props[fmt.Sprintf("field_%04d", i)] = map[string]any{"type": "string"}
	}
	data, err := json.Marshal(map[string]any{
		"uuid": uuid.NewSHA1(uuid.NameSpaceOID, []byte("dashboards-over-limit-listing")).String(), "event": ingest.EventToolsList,
		"distinct_id": "agent-wide", "timestamp": at.Format(time.RFC3339),
		"properties": map[string]any{
			"$mcp_server_name": overLimitServer, "$mcp_server_version": "0.9.0", "$mcp_listed_tool_names": []string{"bulk-import", "ping"},
			"$mcp_parameters": map[string]any{"request": map[string]any{"method": "tools/list", "params": map[string]any{}}},
			"$mcp_response": map[string]any{"tools": []any{
				map[string]any{"name": "bulk-import", "description": "Import records", "inputSchema": map[string]any{"type": "object", "properties": props}},
				map[string]any{"name": "ping", "description": "Ping", "inputSchema": map[string]any{"type": "object", "properties": map[string]any{}}},
			}},
		},
	})
	if err != nil {
		return nil, err
	}
	listing, err := ingest.Parse(data)
	if err != nil {
		return nil, err
	}
	if data, err = json.Marshal(map[string]any{
		"uuid": uuid.NewSHA1(uuid.NameSpaceOID, []byte("dashboards-over-limit-call")).String(), "event": ingest.EventToolCall,
		"distinct_id": "agent-wide", "timestamp": at.Add(time.Second).Format(time.RFC3339),
		"properties": map[string]any{
			"$mcp_tool_name": "bulk-import", "$mcp_is_error": false, "$mcp_server_name": overLimitServer, "$mcp_server_version": "0.9.0",
			"$mcp_parameters": map[string]any{"request": map[string]any{"method": "tools/call", "params": map[string]any{"name": "bulk-import",
				"arguments": map[string]any{"field_0001": "x"}}}},
			"$mcp_response": map[string]any{"content": []any{map[string]any{"type": "text", "text": "ok"}}},
		},
	}); err != nil {
		return nil, err
	}
	call, err := ingest.Parse(data)
	if err != nil {
		return nil, err
	}
	return []*ingest.Event{listing, call}, nil
}

func consumeOtherEvents(ctx context.Context, st *stack.Stack, rdb redis.UniversalClient, ch driver.Conn, end time.Time) error {
	pub, err := ingest.NewPublisher(ingest.PublisherConfig{Brokers: st.KafkaBrokers})
	if err != nil {
		return err
	}
	defer pub.Close()
	var events []*ingest.Event
	for i, name := range otherEventNames {
		data, err := json.Marshal(map[string]any{
			"uuid": uuid.NewSHA1(uuid.NameSpaceOID, fmt.Appendf(nil, "dashboards-other-%d", i)).String(), "event": name,
			"distinct_id": "visitor", "timestamp": end.Add(-time.Hour).Add(time.Duration(i) * time.Second).Format(time.RFC3339),
			"properties": map[string]any{"$current_url": "https://example.com/"},
		})
		if err != nil {
			return err
		}
		ev, err := ingest.Parse(data)
		if err != nil {
			return err
		}
		events = append(events, ev)
	}
	wide, err := overLimitListing(end.Add(-2 * time.Hour))
	if err != nil {
		return err
	}
	events = append(events, wide...)
	if err := pub.Publish(ctx, events...); err != nil {
		return err
	}
	c, err := consumers.New(consumers.Config{Brokers: st.KafkaBrokers, Redis: rdb, ClickHouse: ch, DeadLetters: pub})
	if err != nil {
		return err
	}
	defer c.Close()
	return c.RunUntilDrained(ctx)
}
