package chdb_test

import (
	"context"
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
	}
}

func takeover(ctx context.Context, t *testing.T, ch driver.Conn) {
	for _, tbl := range []string{"events_by_name_hourly", "tool_call_stats_hourly", "ignored_key_paths_hourly",
		"gate_reason_calls_hourly", "rollup_batches", "rollup_writes", "rollup_epochs"} {
		if err := ch.Exec(ctx, "TRUNCATE TABLE mcpulse."+tbl); err != nil {
			t.Fatal(err)
		}
	}
	s := rollup.Stream{Topic: "mcp_tool_calls", Partition: 0}
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	var a rollup.Adder
	// generation writes offsets [from, to) in a generation of the given epoch that began at
	// committed offset from.
	generation := func(epoch uint64, from, to int) {
		t.Helper()
		if err := ch.Exec(ctx, "INSERT INTO mcpulse.rollup_epochs (name, epoch, taken_at) SELECT 'rollups', ?, now()", epoch-1); err != nil {
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
