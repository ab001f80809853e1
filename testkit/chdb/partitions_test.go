package chdb_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/mcpulse/mcpulse/consumers"
	"github.com/mcpulse/mcpulse/demo/report"
	"github.com/mcpulse/mcpulse/ingest"
	"github.com/mcpulse/mcpulse/internal/stores"
	"github.com/mcpulse/mcpulse/migrations"
	"github.com/mcpulse/mcpulse/testkit/chdb"
	"github.com/mcpulse/mcpulse/testkit/testenv"
)

// Current ClickHouse refuses an INSERT whose rows fall in more than
// max_partitions_per_insert_block (100) partitions; every raw table is partitioned by month. One consumer batch of valid events dated across 130 months (a backfill, or clocks
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
	// Every rollup equals its recomputation from the raw rows, on the current engine too.
	mismatches, err := report.RollupMismatches(ctx, cur)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mismatches {
		t.Error(m)
	}
}

// baseSchema is the last migration every deployed database had before current ClickHouse was
// tested: the migrations after it are applied below to a database that already holds data
// spanning more months than one INSERT may write, as production's may.
const baseSchema = 8

// Every migration after the base schema applies on the current engine to a database holding
// 130 months of raw rows, rollups and dead letters: a migration that copies or backfills a
// monthly-partitioned table in one INSERT ... SELECT would be refused there.
func TestMigrationsApplyOverManyMonthsOnCurrentEngine(t *testing.T) {
	inst := chdb.ForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cur, err := stores.OpenClickHouse(ctx, inst.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close()
	if _, err := migrations.UpWith(ctx, cur, nil, migrations.Options{Below: baseSchema + 1}); err != nil {
		t.Fatal(err)
	}
	// 130 months of rows, in inserts of at most 100 months each.
	for _, half := range []string{"number < 65", "number >= 65"} {
		for _, q := range []string{
			`INSERT INTO mcpulse.tool_calls (uuid, timestamp, distinct_id, tool_name, client_name, is_error,
    ignored_keys, counted_ignored_keys, recruitment_reason, inserted_at)
SELECT generateUUIDv4(), toDateTime('2015-01-01 12:00:00', 'UTC') + toIntervalMonth(number), 'backfill', 'search',
    'client', 0, ['limit'], ['limit'], 'invited', now()
FROM numbers(130) WHERE ` + half,
			`INSERT INTO mcpulse.recruitment_events (uuid, timestamp, kind, distinct_id, identity_hash, campaign_id,
    invitation_id, feature_flag, invitation_sent_at, inserted_at)
SELECT generateUUIDv4(), toDateTime('2015-01-01 12:00:00', 'UTC') + toIntervalMonth(number), 'invitation_sent',
    'backfill', 'hash', 'campaign', toString(number), 'flag',
    toDateTime('2015-01-01 12:00:00', 'UTC') + toIntervalMonth(number), now()
FROM numbers(130) WHERE ` + half,
			`INSERT INTO mcpulse.dead_letters (dead_letter_id, received_at, source_topic, reason)
SELECT toString(number), toDateTime('2015-01-01 12:00:00', 'UTC') + toIntervalMonth(number), 'mcp_tool_calls', 'bad_json'
FROM numbers(130) WHERE ` + half,
		} {
			if err := cur.Exec(ctx, q); err != nil {
				t.Fatalf("seeding 130 months: %v\n%s", err, q)
			}
		}
	}
	applied, err := migrations.Up(ctx, cur, nil)
	if err != nil {
		t.Fatalf("migrations after %04d over 130 months of data: %v", baseSchema, err)
	}
	t.Logf("applied %d migrations after %04d over 130 months of data", len(applied), baseSchema)
	var n uint64
	if err := cur.QueryRow(ctx, "SELECT count() FROM mcpulse.tool_calls FINAL").Scan(&n); err != nil || n != 130 {
		t.Errorf("tool_calls after the migrations: %d rows (%v), want 130", n, err)
	}
}
