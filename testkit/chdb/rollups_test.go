package chdb_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/mcpulse/mcpulse/consumers/rollup"
	"github.com/mcpulse/mcpulse/migrations"
	"github.com/mcpulse/mcpulse/testkit/testenv"
)

// The rollup writer's recovery runs the same on both engines: a batch stored but never
// committed is reset from its marker by the next owner, whose replay counts once, and an owner
// in a generation two blocks of epochs later drops the markers of the oldest block (the
// statements of sql/rollup that only a takeover issues, which the comparison's consumer run
// does not reach).
func TestRollupTakeoverOnCurrentEngine(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	cur := openCurrent(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := migrations.Up(ctx, cur, nil); err != nil {
		t.Fatal(err)
	}
	for _, e := range []struct {
		name string
		ch   driver.Conn
	}{{"18.16", env.ClickHouse}, {"current", cur}} {
		t.Run(e.name, func(t *testing.T) { takeover(ctx, t, e.ch) })
		t.Run(e.name+" before 0035", func(t *testing.T) { legacy(ctx, t, e.ch) })
	}
}

// truncateRollups empties the rollups and their bookkeeping.
func truncateRollups(ctx context.Context, t *testing.T, ch driver.Conn) {
	t.Helper()
	for _, tbl := range []string{"events_by_name_hourly", "tool_call_stats_hourly", "ignored_key_paths_hourly",
		"gate_reason_calls_hourly", "rollup_batches", "rollup_writes_before_0035", "rollup_epochs_taken"} {
		if err := ch.Exec(ctx, "TRUNCATE TABLE mcpulse."+tbl); err != nil {
			t.Fatal(err)
		}
	}
}

func takeover(ctx context.Context, t *testing.T, ch driver.Conn) {
	truncateRollups(ctx, t, ch)
	s := rollup.Stream{Topic: "mcp_tool_calls", Partition: 0}
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	var a rollup.Adder
	// generation writes offsets [from, to) in a generation of the given epoch that began at
	// committed offset from.
	generation := func(epoch uint64, from, to int) {
		t.Helper()
		if err := ch.Exec(ctx, "INSERT INTO mcpulse.rollup_epochs_taken (name, epoch, taken_at) SELECT 'rollups', ?, now()", epoch-1); err != nil {
			t.Fatal(err)
		}
		store := rollup.NewStore(ch, rollup.Tables(), 1<<20, nil)
		if err := store.Begin(ctx, map[rollup.Stream]int64{s: int64(from)}); err != nil {
			t.Fatal(err)
		}
		b := store.NewBatch()
		for o := from; o < to; o++ {
			b.Advance(s, int64(o))
			tc := &rollup.ToolCall{Timestamp: at, Tool: "search", Source: "reported", CountedIgnoredKeys: []string{"limit"}}
			a.AddToolCall(b, s, tc)
			a.AddEvent(b, s, "$mcp_tool_call", at)
		}
		w, err := store.Prepare(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Insert(ctx); err != nil {
			t.Fatal(err)
		}
	}
	counted := func(when string, want uint64) {
		t.Helper()
		for _, q := range []string{
			"SELECT sum(events) FROM mcpulse.v_events_by_name_hourly",
			"SELECT sum(occurrences) FROM mcpulse.v_ignored_key_paths_hourly",
		} {
			var n uint64
			if err := ch.QueryRow(ctx, q).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n != want {
				t.Errorf("%s: %s = %d, want %d", when, q, n, want)
			}
		}
	}
	generation(3, 0, 10)
	generation(4, 10, 25) // stored, never committed: the next owner begins at offset 10
	counted("before the takeover", 25)
	generation(2100, 10, 30)
	counted("after the takeover's replay", 30)
	var oldest uint64
	if err := ch.QueryRow(ctx, "SELECT min(epoch) FROM mcpulse.rollup_batches").Scan(&oldest); err != nil {
		t.Fatal(err)
	}
	if oldest != 2100 {
		t.Errorf("after a generation of epoch 2100 the oldest batch marker is of epoch %d, want 2100 (blocks below 1024 dropped)", oldest)
	}
}

// legacy: after the migrations, the statements with which the release before migration 0035
// took its epochs (Begin's first) and read and wrote its markers (the insert precedes a
// batch's rows) fail on both engines, naming the tables migration 0036 renamed, so such a
// consumer takes no epoch, stores no rollup row and commits nothing; and a batch that release
// marked and never committed is still reset from its marker, read from the table's new name.
func legacy(ctx context.Context, t *testing.T, ch driver.Conn) {
	truncateRollups(ctx, t, ch)
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	var newest uint64
	epochRead := ch.QueryRow(ctx, "SELECT max(epoch) FROM mcpulse.rollup_epochs").Scan(&newest)
	epochTaken := ch.Exec(ctx, "INSERT INTO mcpulse.rollup_epochs (name, epoch, taken_at) SELECT 'rollups', 8, now()")
	rows, err := ch.Query(ctx, `SELECT kafka_topic, kafka_partition, argMax(as_of, version) AS marker_as_of, argMax(hours, version) AS marker_hours
FROM mcpulse.rollup_writes
WHERE has(?, kafka_topic)
GROUP BY kafka_topic, kafka_partition`, []string{"mcp_tool_calls"})
	if err == nil {
		rows.Close()
	}
	markersRead := err
	batch, err := ch.PrepareBatch(ctx, "INSERT INTO mcpulse.rollup_writes (kafka_topic, kafka_partition, as_of, hours, version)")
	if err == nil {
		if err = batch.Append("mcp_tool_calls", int32(0), int64(4), []time.Time{at}, uint64(7)<<32|1); err == nil {
			err = batch.Send()
		} else {
			_ = batch.Abort()
		}
	}
	for _, r := range []struct {
		what, table string
		err         error
	}{
		{"Begin's newest epoch", "rollup_epochs", epochRead},
		{"Begin's epoch taken", "rollup_epochs", epochTaken},
		{"Begin's read of the markers", "rollup_writes", markersRead},
		{"a batch's marker insert", "rollup_writes", err},
	} {
		t.Logf("the release before 0035: %s: %v", r.what, r.err)
		if r.err == nil || !strings.Contains(r.err.Error(), "mcpulse."+r.table) {
			t.Errorf("the release before 0035: %s: %v, want an error naming mcpulse.%s", r.what, r.err, r.table)
		}
	}

	// That release's two batches (epoch 7) of two tool calls each, the second never committed.
	if err := ch.Exec(ctx, "INSERT INTO mcpulse.rollup_epochs_taken (name, epoch, taken_at) SELECT 'rollups', 7, now()"); err != nil {
		t.Fatal(err)
	}
	for seq, asOf := range []int{2, 4} {
		version := uint64(7)<<32 | uint64(seq+1)
		if err := ch.Exec(ctx, `INSERT INTO mcpulse.rollup_writes_before_0035 (kafka_topic, kafka_partition, as_of, hours, version)
SELECT 'mcp_tool_calls', 0, ?, [toDateTime(?, 'UTC')], ?`, asOf, at.Unix(), version); err != nil {
			t.Fatal(err)
		}
		if err := ch.Exec(ctx, `INSERT INTO mcpulse.events_by_name_hourly (kafka_topic, kafka_partition, hour, event, events,
as_of, before, before_as_of, version) SELECT 'mcp_tool_calls', 0, toDateTime(?, 'UTC'), '$mcp_tool_call', ?, ?, [toUInt64(?)], ?, ?`,
			at.Unix(), asOf, asOf, asOf-2, asOf-2, version); err != nil {
			t.Fatal(err)
		}
	}
	store := rollup.NewStore(ch, rollup.Tables(), 1<<20, nil)
	if err := store.Begin(ctx, map[rollup.Stream]int64{{Topic: "mcp_tool_calls", Partition: 0}: 2}); err != nil {
		t.Fatal(err)
	}
	var n uint64
	if err := ch.QueryRow(ctx, "SELECT sum(events) FROM mcpulse.v_events_by_name_hourly").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Errorf("after a takeover at offset 2 of a batch marked before 0035: %d tool calls counted, want the 2 committed", n)
	}
}
