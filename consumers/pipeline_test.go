package consumers_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/mcpulse/mcpulse/consumers"
	"github.com/mcpulse/mcpulse/demo/report"
	"github.com/mcpulse/mcpulse/ingest"
)

// markerCheck wraps the consumer's ClickHouse connection: before each insert into
// rollup_batches (a batch's markers, which precede its rollup rows) it reads the markers
// already stored and the group's committed offsets, and records every partition whose newest
// marker is beyond its committed offset. A new owner's reset of a partition's rollups
// (consumers/rollup) relies on there being none: at most one batch per partition has rollup
// rows stored but not committed.
type markerCheck struct {
	driver.Conn
	consumer atomic.Pointer[consumers.Consumer]
	checked  atomic.Int64

	mu         sync.Mutex
	violations []string
}

func (m *markerCheck) PrepareBatch(ctx context.Context, query string, opts ...driver.PrepareBatchOption) (driver.Batch, error) {
	if strings.Contains(query, "mcpulse.rollup_batches") {
		if err := m.check(ctx); err != nil {
			return nil, err
		}
	}
	return m.Conn.PrepareBatch(ctx, query, opts...)
}

func (m *markerCheck) check(ctx context.Context) error {
	lag, err := m.consumer.Load().Lag(ctx)
	if err != nil {
		return err
	}
	committed := map[string]int64{}
	for _, l := range lag {
		committed[fmt.Sprintf("%s/%d", l.Topic, l.Partition)] = l.Committed
	}
	rows, err := m.Conn.Query(ctx, "SELECT kafka_topic, kafka_partition, max(as_of) FROM mcpulse.rollup_batches GROUP BY kafka_topic, kafka_partition")
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			topic     string
			partition int32
			asOf      int64
		)
		if err := rows.Scan(&topic, &partition, &asOf); err != nil {
			return err
		}
		k := fmt.Sprintf("%s/%d", topic, partition)
		if c := committed[k]; asOf > c {
			m.mu.Lock()
			m.violations = append(m.violations, fmt.Sprintf("%s: a marker as of offset %d is stored, the committed offset is %d", k, asOf, c))
			m.mu.Unlock()
		}
	}
	m.checked.Add(1)
	return rows.Err()
}

// The store stages overlap (a batch's raw rows are stored while the batch before it writes its
// rollups and commits), but a batch's rollup rows are written only once the batch before it is
// committed: whenever a batch writes its markers, no partition has a marker stored beyond its
// committed offset. And the rollups still equal their recomputation from the raw rows.
func TestRollupsOfABatchWaitForTheCommitOfTheBatchBefore(t *testing.T) {
	h := newHarness(t)
	var calls [][]byte
	tools := []string{"create_issue", "list_issues", "search_code"}
	for n := 1; n <= 4000; n++ {
		calls = append(calls, envelope(uuidN(n), ingest.EventToolCall, fmt.Sprintf("user-%d", n%61), base.Add(time.Duration(n)*29*time.Second),
			map[string]any{"$mcp_tool_name": tools[n%len(tools)], "$mcp_client_name": "cursor", "$mcp_is_error": n%7 == 0,
				"$mcp_ignored_keys": []string{}, "$mcp_ignored_keys_total": 0}))
	}
	h.publish(ingest.TopicToolCalls, calls...)
	check := &markerCheck{Conn: h.ch}
	c := h.consumer(func(cfg *consumers.Config) {
		cfg.BatchSize = 250
		cfg.ClickHouse = check
	})
	check.consumer.Store(c)
	h.drain(c)

	s := c.Stats()
	if s.Batches < 10 || check.checked.Load() < s.Batches-1 {
		t.Fatalf("%d batches, %d marker writes checked: want many of each", s.Batches, check.checked.Load())
	}
	for _, v := range check.violations {
		t.Error(v)
	}
	if got := h.count("SELECT sum(calls) FROM mcpulse.v_tool_call_stats_hourly"); got != 4000 {
		t.Errorf("calls in the rollup = %d, want 4000", got)
	}
	mismatches, err := report.RollupMismatches(context.Background(), h.ch)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mismatches {
		t.Error(m)
	}
}
