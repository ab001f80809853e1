package consumers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/redis/go-redis/v9"

	"github.com/mcpulse/mcpulse/consumers"
	"github.com/mcpulse/mcpulse/ingest"
	"github.com/mcpulse/mcpulse/internal/stores"
	"github.com/mcpulse/mcpulse/stack"
	"github.com/mcpulse/mcpulse/testkit/testenv"
)

// harness is a migrated embedded stack with clients, one per test.
type harness struct {
	t     *testing.T
	stack *stack.Stack
	ch    driver.Conn
	rdb   redis.UniversalClient
	pub   *ingest.Publisher
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	e := testenv.New(t, testenv.Options{})
	return &harness{t: t, stack: e.Stack, ch: e.ClickHouse, rdb: e.Redis, pub: e.Publisher}
}

func (h *harness) consumer(mod func(*consumers.Config)) *consumers.Consumer {
	h.t.Helper()
	cfg := consumers.Config{
		Brokers: h.stack.KafkaBrokers, Redis: h.rdb, ClickHouse: h.ch, DeadLetters: h.pub,
		BatchWait: 100 * time.Millisecond, IdleToDrain: 500 * time.Millisecond,
	}
	if mod != nil {
		mod(&cfg)
	}
	c, err := consumers.New(cfg)
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { c.Close() })
	return c
}

// drain runs c until every partition is consumed, bounded by a minute.
func (h *harness) drain(c *consumers.Consumer) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.RunUntilDrained(ctx); err != nil {
		h.t.Fatal(err)
	}
	if ctx.Err() != nil {
		h.t.Fatal("consumer did not drain within a minute")
	}
}

// publish sends raw message values to a topic, each keyed as the publisher keys its event
// (ingest.MessageKey: a producer's retries land on one partition, where the dedup window
// catches them); a value that is no valid event gets no key.
func (h *harness) publish(topic string, values ...[]byte) {
	h.t.Helper()
	for _, v := range values {
		var key []byte
		if ev, err := ingest.Parse(v); err == nil {
			key = ingest.MessageKey(ev, consumers.DefaultInstanceURL)
		}
		if err := h.pub.PublishRaw(context.Background(), topic, key, v); err != nil {
			h.t.Fatal(err)
		}
	}
}

// count runs a query returning one number.
func (h *harness) count(query string, args ...any) int64 {
	h.t.Helper()
	var n uint64
	if err := h.ch.QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
		h.t.Fatalf("%s: %v", query, err)
	}
	return int64(n)
}

var base = time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)

func envelope(uuid, event, distinctID string, ts time.Time, props map[string]any) []byte {
	data, err := json.Marshal(map[string]any{
		"uuid": uuid, "event": event, "distinct_id": distinctID,
		"timestamp": ts.Format(time.RFC3339Nano), "properties": props,
	})
	if err != nil {
		panic(err)
	}
	return data
}

func uuidN(n int) string { return fmt.Sprintf("0192f2a0-0000-7000-8000-%012d", n) }

func toolCall(n int, distinctID, tool string, ignored ...string) []byte {
	props := map[string]any{"$mcp_tool_name": tool, "$mcp_client_name": "claude-code", "$mcp_is_error": false}
	if len(ignored) > 0 {
		props["$mcp_ignored_keys"] = ignored
		props["$mcp_ignored_keys_total"] = len(ignored)
	}
	return envelope(uuidN(n), ingest.EventToolCall, distinctID, base.Add(time.Duration(n)*time.Second), props)
}

func recruitmentProps(invitationID string, extra map[string]any) map[string]any {
	props := map[string]any{"campaign_id": "onboarding", "invitation_id": invitationID, "feature_flag": "mcp-interviews"}
	for k, v := range extra {
		props[k] = v
	}
	return props
}

func invitation(n int, distinctID, invitationID string, at time.Time) []byte {
	return envelope(uuidN(n), ingest.EventInvitationSent, distinctID, at, recruitmentProps(invitationID, map[string]any{"interview_recruitment_reason": "invited"}))
}

func response(n int, distinctID, invitationID, answer string, at time.Time) []byte {
	return envelope(uuidN(n), ingest.EventInvitationResponse, distinctID, at, recruitmentProps(invitationID, map[string]any{"response": answer}))
}

// newClusterHarness is newHarness with Redis replaced by a three-master Redis Cluster.
func newClusterHarness(t *testing.T) *harness {
	t.Helper()
	e := testenv.New(t, testenv.Options{Cluster: true})
	return &harness{t: t, stack: e.Stack, ch: e.ClickHouse, rdb: e.Redis, pub: e.Publisher}
}

// openClusterClient starts only a Redis Cluster for the test and returns a cluster client of it.
func openClusterClient(t *testing.T) redis.UniversalClient {
	t.Helper()
	rc := stack.RedisClusterForTest(t)
	rdb, err := stores.OpenRedis(context.Background(), rc.URL())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := rdb.(*redis.ClusterClient); !ok {
		t.Fatalf("OpenRedis(%q) = %T, want a cluster client", rc.URL(), rdb)
	}
	t.Cleanup(func() { rdb.Close() })
	return rdb
}
