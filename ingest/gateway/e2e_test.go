package gateway_test

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/posthog/posthog-go"

	"github.com/mcpulse/mcpulse/consumers"
	"github.com/mcpulse/mcpulse/ingest"
	"github.com/mcpulse/mcpulse/ingest/gateway"
	"github.com/mcpulse/mcpulse/testkit/testenv"
)

// TestRealClientsEndToEnd points the real clients at the gateway: posthog-go (with uuids set, and
// on its default configuration), posthog-node (npm, run with the machine's node), and
// @posthog/mcp around two MCP servers driven by the official MCP client. Their tool calls and
// recruitment events must end up exactly once in ClickHouse through the consumers, and the
// other events be acknowledged.
func TestRealClientsEndToEnd(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	gw, err := gateway.New(gateway.Config{APIKeys: []string{testKey}, Brokers: env.Stack.KafkaBrokers}, env.Publisher)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw.Handler())
	defer srv.Close()

	const goPrefix, nodePrefix = "0192f2a0-0000-7000-8000-", "0192f2a0-0000-7000-9000-"
	const goCalls, nodeCalls = 25, 20

	t.Run("posthog-go", func(t *testing.T) {
		failures := &countingCallback{}
		client, err := posthog.NewWithConfig(testKey, posthog.Config{
			Endpoint: srv.URL, BatchSize: 10, Interval: 50 * time.Millisecond, Callback: failures,
		})
		if err != nil {
			t.Fatal(err)
		}
		uuid := func(n int) string { return fmt.Sprintf("%s%012d", goPrefix, n) }
		ts := time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)
		for i := 1; i <= goCalls; i++ {
			enqueue(t, client, posthog.Capture{Uuid: uuid(i), DistinctId: fmt.Sprintf("go-user-%d", i%4), Event: ingest.EventToolCall,
				Timestamp:  ts.Add(time.Duration(i) * time.Second),
				Properties: posthog.NewProperties().Set("$mcp_tool_name", "search").Set("$mcp_is_error", i%5 == 0)})
		}
		// The same tool call enqueued again (a client retry): stored once.
		enqueue(t, client, posthog.Capture{Uuid: uuid(1), DistinctId: "go-user-1", Event: ingest.EventToolCall, Timestamp: ts.Add(time.Second),
			Properties: posthog.NewProperties().Set("$mcp_tool_name", "search").Set("$mcp_is_error", false)})
		rec := posthog.NewProperties().Set("campaign_id", "go-campaign").Set("invitation_id", "go-inv-1").Set("feature_flag", "mcp-interviews")
		enqueue(t, client, posthog.Capture{Uuid: uuid(1001), DistinctId: "go-user-1", Event: ingest.EventInvitationSent, Timestamp: ts.Add(time.Minute),
			Properties: merge(rec, posthog.NewProperties().Set("interview_recruitment_reason", "invited"))})
		enqueue(t, client, posthog.Capture{Uuid: uuid(1002), DistinctId: "go-user-1", Event: ingest.EventBookingLinkOpened, Timestamp: ts.Add(2 * time.Minute), Properties: rec})
		enqueue(t, client, posthog.Capture{Uuid: uuid(1003), DistinctId: "go-user-1", Event: ingest.EventInvitationResponse, Timestamp: ts.Add(3 * time.Minute),
			Properties: merge(rec, posthog.NewProperties().Set("response", "decline"))})
		enqueue(t, client, posthog.Identify{DistinctId: "go-user-1", Properties: posthog.NewProperties().Set("plan", "test")})
		if err := client.Close(); err != nil {
			t.Fatal(err)
		}
		if n := failures.failed(); n != 0 {
			t.Fatalf("posthog-go reported %d failed messages", n)
		}
	})

	const goDefaultCalls = 15
	t.Run("posthog-go default config", func(t *testing.T) {
		// Nothing set but the endpoint: no Uuid ("uuid":"" on the wire), the SDK's own timestamps.
		failures := &countingCallback{}
		client, err := posthog.NewWithConfig(testKey, posthog.Config{Endpoint: srv.URL, Callback: failures})
		if err != nil {
			t.Fatal(err)
		}
		for i := range goDefaultCalls {
			enqueue(t, client, posthog.Capture{DistinctId: fmt.Sprintf("go-default-%d", i%3), Event: ingest.EventToolCall,
				Properties: posthog.NewProperties().Set("$mcp_tool_name", "lookup").Set("$mcp_is_error", false)})
		}
		if err := client.Close(); err != nil {
			t.Fatal(err)
		}
		if n := failures.failed(); n != 0 {
			t.Fatalf("posthog-go reported %d failed messages", n)
		}
	})

	t.Run("posthog-node", func(t *testing.T) {
		dir := npmCI(t, "node", "posthog-node")
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "node", "send.js")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GATEWAY_URL="+srv.URL, "API_KEY="+testKey, "UUID_PREFIX="+nodePrefix, fmt.Sprintf("COUNT=%d", nodeCalls))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("node send.js: %v\n%s", err, out)
		}
		t.Logf("node: %s", strings.TrimSpace(string(out)))
	})

	// A retried batch (posthog-go's: timestamps, no uuid) is stored once; the same event sent in
	// two requests without uuid or timestamp is two events, as PostHog capture counts it.
	t.Run("retries and separate events", func(t *testing.T) {
		post := func(body []byte) {
			t.Helper()
			res, err := http.Post(srv.URL+"/batch/", "application/json", bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != http.StatusOK {
				t.Fatalf("%d", res.StatusCode)
			}
		}
		retried := []byte(`{"api_key":"` + testKey + `","batch":[{"uuid":"","event":"$mcp_tool_call","distinct_id":"retry-user",` +
			`"timestamp":"` + time.Now().UTC().Add(-time.Minute).Format(time.RFC3339Nano) + `","properties":{"$mcp_tool_name":"retried"}}]}`)
		bare := []byte(`{"api_key":"` + testKey + `","batch":[{"event":"$mcp_tool_call","distinct_id":"bare-user","properties":{"$mcp_tool_name":"bare"}}]}`)
		for range 2 {
			post(retried)
			post(bare)
		}
	})

	var mcpCalls []sdkCall
	t.Run("@posthog/mcp", func(t *testing.T) {
		mcpCalls, _ = runMCPClient(t, srv.URL, testKey)
	})

	c, err := consumers.New(consumers.Config{
		Brokers: env.Stack.KafkaBrokers, Redis: env.Redis, ClickHouse: env.ClickHouse, DeadLetters: env.Publisher,
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

	count := func(query string, args ...any) int64 {
		t.Helper()
		var n uint64
		if err := env.ClickHouse.QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
			t.Fatalf("%s: %v", query, err)
		}
		return int64(n)
	}
	for _, c := range []struct {
		prefix        string
		calls, errors int64
	}{{goPrefix, goCalls, goCalls / 5}, {nodePrefix, nodeCalls, nodeCalls / 4}} {
		like := c.prefix + "%"
		if n := count(`SELECT count() FROM mcpulse.tool_calls FINAL WHERE toString(uuid) LIKE ?`, like); n != c.calls {
			t.Errorf("%s: %d tool_calls rows, want exactly %d", c.prefix, n, c.calls)
		}
		if n := count(`SELECT count() FROM mcpulse.tool_calls FINAL WHERE toString(uuid) LIKE ? AND is_error = 1`, like); n != c.errors {
			t.Errorf("%s: %d failed tool calls, want %d", c.prefix, n, c.errors)
		}
		if n := count(`SELECT count() FROM mcpulse.recruitment_events FINAL WHERE toString(uuid) LIKE ?`, like); n != 3 {
			t.Errorf("%s: %d recruitment_events rows, want exactly 3", c.prefix, n)
		}
	}
	if n := count(`SELECT count() FROM mcpulse.tool_calls FINAL WHERE distinct_id LIKE 'go-default-%'`); n != goDefaultCalls {
		t.Errorf("posthog-go default config: %d tool_calls rows, want exactly %d", n, goDefaultCalls)
	}
	if n := count(`SELECT uniqExact(uuid) FROM mcpulse.tool_calls FINAL WHERE distinct_id LIKE 'go-default-%'`); n != goDefaultCalls {
		t.Errorf("posthog-go default config: %d distinct uuids, want %d", n, goDefaultCalls)
	}
	mcpTools := map[string]bool{}
	for _, c := range mcpCalls {
		mcpTools[c.Tool] = true
	}
	var toolList []string
	for tool := range mcpTools {
		toolList = append(toolList, tool)
	}
	if n := count(`SELECT count() FROM mcpulse.tool_calls FINAL WHERE has(?, tool_name)`, toolList); n != int64(len(mcpCalls)) {
		t.Errorf("@posthog/mcp: %d tool_calls rows, want exactly %d", n, len(mcpCalls))
	}
	checkMCPRows(t, env.ClickHouse, mcpCalls)

	// Every stored event counted per name on the data-quality dashboard, the kinds mcpulse
	// stores apart and those it only counts alike; the names it does not route listed apart.
	failedMCP := 0
	for _, c := range mcpCalls {
		if c.Expect.Error != "" {
			failedMCP++
		}
	}
	wantEvents := map[string]uint64{
		ingest.EventToolCall:           uint64(goCalls + goDefaultCalls + nodeCalls + 1 + 2 + len(mcpCalls)),
		ingest.EventInvitationSent:     2,
		ingest.EventBookingLinkOpened:  2,
		ingest.EventInvitationResponse: 2,
		"$identify":                    2,
		"$mcp_initialize":              uint64(len(mcpServerNames)),
		"$mcp_tools_list":              uint64(len(mcpServerNames)),
		"$exception":                   uint64(failedMCP),
	}
	gotEvents := map[string]uint64{}
	for _, row := range panelRows(runPanel(t, env.ClickHouse, "suppression-data-quality", "events-by-name")) {
		gotEvents[row["event"].(string)] += uint64(row["events"].(float64))
	}
	if !maps.Equal(gotEvents, wantEvents) {
		t.Errorf("data-quality dashboard, events per name (v_events_by_name_hourly):\n got %v\nwant %v", gotEvents, wantEvents)
	}
	others := map[string]float64{}
	for _, row := range panelRows(runPanel(t, env.ClickHouse, "suppression-data-quality", "other-events")) {
		others[row["event"].(string)] = row["events"].(float64)
	}
	if want := map[string]float64{}; !maps.Equal(others, want) {
		t.Errorf("data-quality dashboard, events mcpulse does not route: %v, want %v", others, want)
	}
	// posthog-node sends an identify's person properties in properties.$set, posthog-go at the
	// top level: both are stored.
	if n := count(`SELECT count() FROM mcpulse.mcp_identify_events FINAL WHERE distinct_id IN ('go-user-1', 'node-user-1')
		AND visitParamExtractString(set_properties, 'plan') = 'test'`); n != 2 {
		t.Errorf("identifies with $set plan=test: %d rows, want posthog-go's and posthog-node's", n)
	}
	if n := count(`SELECT count() FROM mcpulse.tool_calls FINAL WHERE distinct_id = 'retry-user'`); n != 1 {
		t.Errorf("a batch sent twice: %d rows, want 1", n)
	}
	if n := count(`SELECT count() FROM mcpulse.tool_calls FINAL WHERE distinct_id = 'bare-user'`); n != 2 {
		t.Errorf("an event without uuid or timestamp sent in two requests: %d rows, want 2", n)
	}
	if n := count(`SELECT count() FROM mcpulse.dead_letters`); n != 0 {
		t.Errorf("%d dead letters, want 0", n)
	}
	if n := count(`SELECT count() FROM mcpulse.tool_calls FINAL WHERE properties LIKE '%` + testKey + `%'`); n != 0 {
		t.Errorf("%d rows store the project API key", n)
	}
	if n := count(`SELECT count() FROM mcpulse.tool_calls FINAL WHERE properties LIKE '%"$lib":"posthog-%'`); n != int64(goCalls+goDefaultCalls+nodeCalls+len(mcpCalls)) {
		t.Errorf("%d rows keep $lib, want %d", n, goCalls+goDefaultCalls+nodeCalls+len(mcpCalls))
	}
}

func enqueue(t *testing.T, c posthog.Client, m posthog.Message) {
	t.Helper()
	if err := c.Enqueue(m); err != nil {
		t.Fatal(err)
	}
}

func merge(a, b posthog.Properties) posthog.Properties {
	out := posthog.NewProperties()
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

type countingCallback struct {
	n atomic.Int64
}

func (c *countingCallback) Success(posthog.APIMessage)            {}
func (c *countingCallback) Failure(_ posthog.APIMessage, _ error) { c.n.Add(1) }
func (c *countingCallback) failed() int64                         { return c.n.Load() }
