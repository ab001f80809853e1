package chdb_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/mcpulse/mcpulse/consumers"
	"github.com/mcpulse/mcpulse/ingest"
	"github.com/mcpulse/mcpulse/internal/stores"
	"github.com/mcpulse/mcpulse/migrations"
	"github.com/mcpulse/mcpulse/testkit/chdb"
	"github.com/mcpulse/mcpulse/testkit/testenv"
)

// Current ClickHouse refuses an INSERT whose rows fall in more than
// max_partitions_per_insert_block (100) partitions; every raw table and rollup is partitioned
// by month. One consumer batch of valid events dated across 130 months (a backfill, or clocks
// set years apart) must still be stored whole on the current engine, with its rollups.
func TestConsumerBatchOverManyMonthsOnCurrentEngine(t *testing.T) {
	inst := chdb.ForTest(t)
	env := testenv.New(t, testenv.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cur, err := stores.OpenClickHouse(ctx, inst.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close()
	if _, err := migrations.Up(ctx, cur, nil); err != nil {
		t.Fatal(err)
	}
	const months = 130
	first := time.Date(2015, 1, 1, 12, 0, 0, 0, time.UTC)
	var corpus bytes.Buffer
	for i := range months {
		fmt.Fprintf(&corpus, `{"uuid":%q,"event":"$mcp_tool_call","distinct_id":"backfill","timestamp":%q,"properties":{"$mcp_tool_name":"search","$mcp_ignored_keys":["limit"]}}`+"\n",
			uuid.NewString(), first.AddDate(0, i, 0).Format(time.RFC3339))
	}
	if _, err := ingest.PublishFile(ctx, env.Publisher, &corpus, "backfill.jsonl", nil); err != nil {
		t.Fatal(err)
	}
	c, err := consumers.New(consumers.Config{
		Brokers: env.Stack.KafkaBrokers, GroupID: "chdb-partitions", Redis: env.Redis, ClickHouse: cur,
		DeadLetters: env.Publisher, BatchSize: 1000, BatchWait: time.Second, IdleToDrain: 500 * time.Millisecond,
		MaxRetryBackoff: 500 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	drainCtx, stop := context.WithTimeout(ctx, time.Minute)
	defer stop()
	if err := c.RunUntilDrained(drainCtx); err != nil || drainCtx.Err() != nil {
		t.Errorf("consumer did not drain the batch within a minute (err %v); engine said:\n%s", err, inst.Log())
	}
	for _, q := range []string{
		"SELECT count() FROM mcpulse.tool_calls FINAL",
		"SELECT count() FROM (SELECT hour FROM mcpulse.v_ignored_key_rates_hourly WHERE calls_with_ignored_keys = 1)",
		"SELECT count() FROM mcpulse.v_ignored_keys_hourly WHERE key_path = 'limit'",
	} {
		var n uint64
		if err := cur.QueryRow(ctx, q).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != months {
			t.Errorf("%s = %d, want %d", q, n, months)
		}
	}
}
