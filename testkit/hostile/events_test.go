package hostile

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/mcpulse/mcpulse/consumers"
	"github.com/mcpulse/mcpulse/ingest"
	"github.com/mcpulse/mcpulse/internal/safetext"
	"github.com/mcpulse/mcpulse/testkit/testenv"
)

var base = time.Now().UTC().Truncate(time.Hour).Add(-2 * time.Hour)

func uuidN(n int) string { return fmt.Sprintf("0193a0b0-0000-7000-8000-%012d", n) }

func envelope(n int, event, distinctID string, props map[string]any) []byte {
	data, err := json.Marshal(map[string]any{
		"uuid": uuidN(n), "event": event, "distinct_id": distinctID,
		"timestamp": base.Add(time.Duration(n) * time.Second).Format(time.RFC3339Nano), "properties": props,
	})
	if err != nil {
		panic(err)
	}
	return data
}

// listing is a $mcp_tools_list as @posthog/mcp sends it, one tool with schema.
func listing(n int, distinctID, session, server, tool string, schema map[string]any) []byte {
	return envelope(n, ingest.EventToolsList, distinctID, map[string]any{
		"$session_id": session, "$mcp_server_name": server, "$mcp_server_version": "1.0.0", "$mcp_listed_tool_names": []string{tool},
		"$mcp_parameters": map[string]any{"request": map[string]any{"method": "tools/list", "params": map[string]any{}}},
		"$mcp_response":   map[string]any{"tools": []any{map[string]any{"name": tool, "inputSchema": schema}}},
	})
}

// call is a successful $mcp_tool_call with its arguments, as @posthog/mcp sends it.
func call(n int, distinctID, session, server, client, tool string, args map[string]any) []byte {
	return envelope(n, ingest.EventToolCall, distinctID, map[string]any{
		"$session_id": session, "$mcp_tool_name": tool, "$mcp_is_error": false, "$mcp_server_name": server,
		"$mcp_server_version": "1.0.0", "$mcp_client_name": client,
		"$mcp_parameters": map[string]any{"request": map[string]any{"method": "tools/call", "params": map[string]any{"name": tool, "arguments": args}}},
		"$mcp_response":   map[string]any{"content": []any{map[string]any{"type": "text", "text": "ok"}}},
	})
}

func objectSchema(keys ...string) map[string]any {
	props := map[string]any{}
	for _, k := range keys {
		props[k] = map[string]any{"type": "string"}
	}
	return map[string]any{"type": "object", "properties": props}
}

type env struct {
	*testenv.Env
	t *testing.T
}

func (e env) publish(values ...[]byte) {
	e.t.Helper()
	for _, v := range values {
		ev, err := ingest.Parse(v)
		if err != nil {
			e.t.Fatalf("a probe is not a valid event: %v", err)
		}
		if err := e.Publisher.Publish(context.Background(), ev); err != nil {
			e.t.Fatal(err)
		}
	}
}

// drain runs a consumer until every partition is consumed, bounded by a minute.
func (e env) drain() {
	e.t.Helper()
	c, err := consumers.New(consumers.Config{
		Brokers: e.Stack.KafkaBrokers, Redis: e.Redis, ClickHouse: e.ClickHouse, DeadLetters: e.Publisher,
		BatchWait: 100 * time.Millisecond, IdleToDrain: 500 * time.Millisecond,
	})
	if err != nil {
		e.t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.RunUntilDrained(ctx); err != nil || ctx.Err() != nil {
		e.t.Fatalf("the consumer did not drain within a minute: %v", err)
	}
}

func query[T any](t *testing.T, ch driver.Conn, q string, args ...any) []T {
	t.Helper()
	rows, err := ch.Query(context.Background(), q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		var v T
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

// One batch carries every hostile event with its neighbours: a call with a 900 KB undeclared
// argument key, calls with tool, client and server names of 10 KB (two of each, differing only
// at their end), and a tools list whose one schema declares 20,000 keys, followed by calls of
// that tool and canary calls of other people, on the listing's partition and on others. Every
// stored dimension is bounded (key paths to 1 KiB, names to 256 bytes, each marked and still
// distinct), the over-limit schema's calls are stored as not measured, and every canary is
// stored and queryable.
func TestHostileEventsAreBoundedAndNeighboursStored(t *testing.T) {
	e := env{testenv.New(t, testenv.Options{}), t}
	hugeKey := strings.Repeat("k", 900*1024)
	long := func(c string, end string) string { return strings.Repeat(c, 10*1024) + end }
	wide := make([]string, 20_000)
	for i := range wide {
		wide[i] = fmt.Sprintf("field_%05d", i)
	}
	const canaries = 12
	e.publish(
		listing(1, "agent-keys", "ses-keys", "srv", "search", objectSchema("q")),
		call(2, "agent-keys", "ses-keys", "srv", "claude-code", "search", map[string]any{"q": "x", hugeKey: 1}),
		call(3, "agent-names", "ses-names", long("s", "1"), long("c", "1"), long("t", "1"), map[string]any{}),
		call(4, "agent-names", "ses-names", long("s", "2"), long("c", "2"), long("t", "2"), map[string]any{}),
		listing(5, "agent-wide", "ses-wide", "wide-srv", "wide", objectSchema(wide...)),
		call(6, "agent-wide", "ses-wide", "wide-srv", "claude-code", "wide", map[string]any{"field_00001": "x", "extra": "y"}),
	)
	for i := range canaries {
		e.publish(call(100+i, fmt.Sprintf("canary-%02d", i), fmt.Sprintf("ses-canary-%02d", i), "srv", "claude-code", "search", map[string]any{"q": "x"}))
	}
	e.drain()

	// The key path: bounded, marked, the one KeyPath gives, in the raw row and in the rollup.
	paths := query[[]string](t, e.ClickHouse, "SELECT ignored_keys FROM mcpulse.tool_calls FINAL WHERE uuid = $1", uuidN(2))
	if len(paths) != 1 || len(paths[0]) != 1 {
		t.Fatalf("the 900 KB key's call: ignored keys %d rows", len(paths))
	}
	if p := paths[0][0]; len(p) > safetext.MaxKeyPath || !safetext.Bounded(p) || !strings.HasPrefix(p, "kkkk") ||
		!strings.Contains(p, fmt.Sprintf("[%d bytes, sha256:", len(hugeKey))) {
		t.Errorf("stored key path: %d bytes, %.80q…, want at most %d, marked", len(p), p[max(0, len(p)-80):], safetext.MaxKeyPath)
	}
	if n := query[uint64](t, e.ClickHouse, "SELECT max(length(key_path)) FROM mcpulse.ignored_key_paths_hourly"); len(n) != 1 || n[0] == 0 || n[0] > safetext.MaxKeyPath {
		t.Errorf("longest key path in ignored_key_paths_hourly: %v bytes, want 1..%d", n, safetext.MaxKeyPath)
	}

	// Names: bounded, marked, still two of each, in the raw rows and the rollup.
	for _, col := range []string{"tool_name", "client_name", "server_name"} {
		got := query[string](t, e.ClickHouse, "SELECT DISTINCT "+col+" FROM mcpulse.tool_calls FINAL WHERE distinct_id = 'agent-names'")
		if len(got) != 2 {
			t.Errorf("%s: %d distinct values stored, want 2", col, len(got))
		}
		for _, v := range got {
			if len(v) > safetext.MaxName || !safetext.Bounded(v) {
				t.Errorf("%s: %d bytes, marked %v; want at most %d, marked", col, len(v), safetext.Bounded(v), safetext.MaxName)
			}
		}
		if n := query[uint64](t, e.ClickHouse, "SELECT max(length("+col+")) FROM mcpulse.tool_call_stats_hourly"); len(n) != 1 || n[0] > safetext.MaxName {
			t.Errorf("longest %s in tool_call_stats_hourly: %v bytes, want at most %d", col, n, safetext.MaxName)
		}
	}

	// The 20,000-key schema is over a limit: its call is stored, not measured.
	reason := query[string](t, e.ClickHouse, "SELECT ignored_keys_reason FROM mcpulse.tool_calls FINAL WHERE uuid = $1", uuidN(6))
	if len(reason) != 1 || reason[0] != "schema_over_limit" {
		t.Errorf("the over-limit schema's call: reason %q, want schema_over_limit", reason)
	}
	// Every canary is stored, measured (no ignored keys), on the listing's partition and on others.
	type canary struct {
		Partition int32  `ch:"kafka_partition"`
		Source    string `ch:"ignored_keys_source"`
	}
	rows, err := e.ClickHouse.Query(context.Background(), "SELECT kafka_partition, ignored_keys_source FROM mcpulse.tool_calls FINAL WHERE startsWith(distinct_id, 'canary-')")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	widePartition := query[int32](t, e.ClickHouse, "SELECT kafka_partition FROM mcpulse.tool_calls FINAL WHERE uuid = $1", uuidN(6))
	var stored, same, other int
	for rows.Next() {
		var c canary
		if err := rows.ScanStruct(&c); err != nil {
			t.Fatal(err)
		}
		stored++
		if c.Source != "schema" {
			t.Errorf("a canary's ignored keys came from %q, want schema", c.Source)
		}
		if len(widePartition) == 1 && c.Partition == widePartition[0] {
			same++
		} else {
			other++
		}
	}
	if stored != canaries {
		t.Errorf("%d canaries stored, want %d", stored, canaries)
	}
	if same == 0 || other == 0 {
		t.Errorf("canaries on the over-limit listing's partition: %d, on others: %d; the probe needs both", same, other)
	}
}
