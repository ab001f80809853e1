package consumers_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/mcpulse/mcpulse/consumers"
	"github.com/mcpulse/mcpulse/consumers/cardinality"
	"github.com/mcpulse/mcpulse/demo"
	"github.com/mcpulse/mcpulse/demo/report"
	"github.com/mcpulse/mcpulse/ingest"
	"github.com/mcpulse/mcpulse/internal/stores"
	"github.com/mcpulse/mcpulse/migrations"
	mcsql "github.com/mcpulse/mcpulse/sql"
	"github.com/mcpulse/mcpulse/stack"
)

// stopBeforeMarkers is a consumer's ClickHouse connection that stops the consumer (cancel)
// when a batch, its raw rows stored, first writes its rollup markers: a crash after the
// INSERTs ended and before anything was committed.
type stopBeforeMarkers struct {
	driver.Conn
	cancel  context.CancelFunc
	stopped atomic.Bool
}

func (s *stopBeforeMarkers) PrepareBatch(ctx context.Context, query string, opts ...driver.PrepareBatchOption) (driver.Batch, error) {
	if strings.Contains(query, "mcpulse.rollup_batches") && s.stopped.CompareAndSwap(false, true) {
		s.cancel()
		return nil, context.Canceled
	}
	return s.Conn.PrepareBatch(ctx, query, opts...)
}

// divertFeeds is a consumer's ClickHouse connection whose inserts into the views' feeds go to
// Null tables no view reads (suffix "_unfed", which the test makes): the raw rows of a batch
// are stored and the views never see them, as when a view's insert failed after the raw part
// committed.
type divertFeeds struct{ driver.Conn }

func (d divertFeeds) PrepareBatch(ctx context.Context, query string, opts ...driver.PrepareBatchOption) (driver.Batch, error) {
	for _, feed := range migrations.ViewFeeds {
		query = strings.Replace(query, migrations.Database+"."+feed+" ", migrations.Database+"."+feed+"_unfed ", 1)
	}
	return d.Conn.PrepareBatch(ctx, query, opts...)
}

// A batch read again after the consumer stopped between its raw INSERTs and its commit is
// written as the same parts, which a replicated server drops: with the batch's offset ranges
// recorded, every raw table (tool_calls, recruitment_events and mcp_initialize_events here)
// holds each event once on both replicas without FINAL, although the next member reads with
// another batch size, and the views read from the feeds (the funnel, the cardinality
// overflow) and every rollup equal their recomputation from the raw tables. The same when the
// first attempt's raw rows were stored and the views never fed (its feed inserts diverted):
// the replay's raw parts are dropped and its feed inserts feed the views. Then a third corpus
// stopped alike with the records deleted before the replay is stored twice: the check can
// fail.
func TestAReplayedBatchIsDroppedByAReplicatedServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	s, err := stack.Start(ctx, stack.Config{Replicas: 2})
	stack.SkipOrFail(t, err)
	t.Cleanup(func() { s.Close() })
	cc := s.ClickHouseCluster
	replica := func(i int) driver.Conn {
		conn, err := stores.OpenClickHouse(ctx, cc.Hosts[i].DSN)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return conn
	}
	first, second := replica(0), replica(1)
	if _, err := migrations.UpWith(ctx, first, nil, migrations.Options{Cluster: cc.Name, DDLTimeout: demo.EmbeddedDDLTimeout}); err != nil {
		t.Fatal(err)
	}
	for _, feed := range migrations.ViewFeeds {
		// On the first replica only: the first member inserts through it.
		if err := first.Exec(ctx, fmt.Sprintf("CREATE TABLE %s.%s_unfed AS %[1]s.%[2]s ENGINE = Null", migrations.Database, feed)); err != nil {
			t.Fatal(err)
		}
	}
	rdb, err := stores.OpenRedis(ctx, s.RedisURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	pub, err := ingest.NewPublisher(ingest.PublisherConfig{Brokers: s.KafkaBrokers})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pub.Close() })
	h := &harness{t: t, stack: s, ch: first, rdb: rdb, pub: pub}
	// Tool names over 60 values a server, 20 admitted per Kafka partition and hour: calls are
	// folded, and the overflow views count them.
	caps := cardinality.Limits{Tools: 20}

	const calls, invitations, handshakes = 3000, 200, 1000
	for round, c := range []struct {
		name           string
		records, unfed bool
	}{
		{"recorded", true, false},
		{"recorded, views not fed by the first attempt", true, true},
		{"records deleted", false, false},
	} {
		srv, prefix := fmt.Sprintf("server_%d", round), fmt.Sprintf("inv%d-", round)
		var values [][]byte
		for n := 1; n <= calls; n++ {
			values = append(values, cappedCall(round*calls+n, fmt.Sprintf("user-%d", n%97), srv, fmt.Sprintf("t%02d", n%60), "claude-code",
				base.Add(time.Duration(n)*time.Second)))
		}
		h.publish(ingest.TopicToolCalls, values...)
		values = values[:0]
		for i := range invitations {
			values = append(values, invitation(100000+round*invitations+i, person(i), fmt.Sprintf("%s%d", prefix, i), base))
		}
		h.publish(ingest.TopicRecruitment, values...)
		values = values[:0]
		for n := range handshakes {
			values = append(values, envelope(uuidN(500000+round*handshakes+n), ingest.EventInitialize, fmt.Sprintf("user-%d", n%89), base,
				map[string]any{"$mcp_server_name": srv, "$mcp_client_name": "claude-code"}))
		}
		h.publish(ingest.TopicToolCalls, values...)

		runCtx, stop := context.WithCancel(ctx)
		var conn driver.Conn = first
		if c.unfed {
			conn = divertFeeds{first}
		}
		crash := &stopBeforeMarkers{Conn: conn, cancel: stop}
		c1 := h.consumer(func(cfg *consumers.Config) { cfg.ClickHouse = crash; cfg.BatchSize = 100000; cfg.Caps = caps })
		if err := c1.Run(runCtx); err != nil && !errors.Is(err, context.Canceled) {
			t.Fatal(err)
		}
		stop()
		if !crash.stopped.Load() {
			t.Fatal("the first member never reached its rollup markers")
		}
		c1.Close()
		stored := h.count("SELECT count() FROM mcpulse.tool_calls WHERE server_name = ?", srv)
		if stored == 0 {
			t.Fatal("the first member stored no raw row before it stopped: nothing is replayed")
		}
		if c.unfed {
			if n := h.count("SELECT toUInt64(uniqExactMerge(invitations)) FROM mcpulse.recruitment_funnel_daily WHERE campaign_id = 'onboarding'"); n != int64(round*invitations) {
				t.Fatalf("the funnel counts %d invitations, want the %d of the rounds before: the first attempt fed the views", n, round*invitations)
			}
		}
		if !c.records {
			if err := rdb.Del(ctx, "mcpulse:batch-ranges:{"+consumers.DefaultGroupID+"}").Err(); err != nil {
				t.Fatal(err)
			}
		}
		// Batches far smaller than a partition's handshakes (1,000 over the topic's
		// partitions): read again without the records, they surely cut them into other blocks.
		h.drain(h.consumer(func(cfg *consumers.Config) { cfg.BatchSize = 100; cfg.Caps = caps }))

		for i, conn := range []driver.Conn{first, second} {
			for _, tbl := range []string{"tool_calls", "recruitment_events", "mcp_initialize_events", "recruitment_funnel_daily", "cardinality_overflow_hourly"} {
				if err := conn.Exec(ctx, "SYSTEM SYNC REPLICA mcpulse."+tbl); err != nil {
					t.Fatal(err)
				}
			}
			againTotal := uint64(0)
			for _, tbl := range []struct {
				name, where string
				want        int64
			}{
				{"mcp_initialize_events", "server_name = '" + srv + "'", handshakes},
				{"tool_calls", "server_name = '" + srv + "'", calls},
				{"recruitment_events", "startsWith(invitation_id, '" + prefix + "')", invitations},
			} {
				var rows, events uint64
				if err := conn.QueryRow(ctx, "SELECT count(), uniqExact(uuid) FROM mcpulse."+tbl.name+" WHERE "+tbl.where).Scan(&rows, &events); err != nil {
					t.Fatal(err)
				}
				if int64(events) != tbl.want {
					t.Errorf("%s, replica %d: %s holds %d events, want %d", c.name, i+1, tbl.name, events, tbl.want)
				}
				if c.records && rows != events {
					t.Errorf("%s, replica %d: %s holds %d rows for %d events without FINAL: the replay was stored again", c.name, i+1, tbl.name, rows, events)
				}
				againTotal += rows - events
				t.Logf("%s, replica %d: %s %d rows, %d events (%d tool calls stored before the stop)", c.name, i+1, tbl.name, rows, events, stored)
			}
			if !c.records && againTotal == 0 {
				t.Errorf("%s, replica %d: the replay was still dropped from every table: the check cannot tell", c.name, i+1)
			}
			folded := countOf(t, conn, "SELECT count() FROM mcpulse.tool_calls FINAL WHERE server_name = ? AND folded_tool_name != ''", srv)
			if folded == 0 {
				t.Errorf("%s, replica %d: no call folded: the overflow views are not exercised", c.name, i+1)
			}
			for _, m := range viewMismatches(t, conn) {
				t.Errorf("%s, replica %d: %s", c.name, i+1, m)
			}
			mismatches, err := report.RollupMismatches(ctx, conn)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range mismatches {
				t.Errorf("%s, replica %d: %s", c.name, i+1, m)
			}
		}
	}
}

// countOf runs a query returning one number on conn.
func countOf(t *testing.T, conn driver.Conn, query string, args ...any) uint64 {
	t.Helper()
	var n uint64
	if err := conn.QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// overflowRecomputed is cardinality_overflow_hourly recomputed from the deduplicated raw
// calls: per hour, server and dimension, the distinct values folded and the calls folding one.
const overflowRecomputed = `
SELECT hour, server_name, dimension, folded_values, folded_calls FROM
(
    SELECT toStartOfHour(timestamp) AS hour, server_name, 'tool' AS dimension,
        uniqExact(folded_tool_name) AS folded_values, uniqExact(uuid) AS folded_calls
    FROM mcpulse.tool_calls FINAL WHERE folded_tool_name != '' GROUP BY hour, server_name
    UNION ALL
    SELECT toStartOfHour(timestamp) AS hour, server_name, 'client' AS dimension,
        uniqExact(folded_client_name) AS folded_values, uniqExact(uuid) AS folded_calls
    FROM mcpulse.tool_calls FINAL WHERE folded_client_name != '' GROUP BY hour, server_name
    UNION ALL
    SELECT toStartOfHour(timestamp) AS hour, server_name, 'key_path' AS dimension,
        uniqExact(key_path) AS folded_values, uniqExact(uuid) AS folded_calls
    FROM mcpulse.tool_calls FINAL ARRAY JOIN folded_key_paths AS key_path
    WHERE notEmpty(folded_key_paths) GROUP BY hour, server_name
)
ORDER BY hour, server_name, dimension`

// overflowStored is every row of cardinality_overflow_hourly, its states merged.
const overflowStored = `
SELECT hour, server_name, dimension, toUInt64(uniqMerge(folded_values)) AS folded_values,
    toUInt64(uniqMerge(folded_calls)) AS folded_calls
FROM mcpulse.cardinality_overflow_hourly
GROUP BY hour, server_name, dimension
ORDER BY hour, server_name, dimension`

// viewMismatches compares what the materialized views filled (the funnel, the cardinality
// overflow) with its recomputation from the raw tables, read through conn, and describes each
// difference (none: nil).
func viewMismatches(t *testing.T, conn driver.Conn) []string {
	t.Helper()
	rowsOf := func(query string) []string {
		rows, err := conn.Query(context.Background(), query)
		if err != nil {
			t.Fatalf("%s: %v", query, err)
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			vals := make([]any, len(rows.ColumnTypes()))
			for i, ct := range rows.ColumnTypes() {
				vals[i] = reflect.New(ct.ScanType()).Interface()
			}
			if err := rows.Scan(vals...); err != nil {
				t.Fatal(err)
			}
			parts := make([]string, len(vals))
			for i, v := range vals {
				x := reflect.ValueOf(v).Elem().Interface()
				if tm, ok := x.(time.Time); ok {
					x = tm.UTC().Format(time.RFC3339)
				}
				parts[i] = fmt.Sprint(x)
			}
			out = append(out, strings.Join(parts, " | "))
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		slices.Sort(out)
		return out
	}
	var out []string
	for _, q := range []struct{ name, stored, recomputed string }{
		{"funnel", mcsql.Query("outcome_funnel"), mcsql.Query("recompute_funnel")},
		{"cardinality overflow", overflowStored, overflowRecomputed},
	} {
		have, want := rowsOf(q.stored), rowsOf(q.recomputed)
		if len(want) == 0 {
			out = append(out, q.name+": nothing recomputed from the raw tables: the check is empty")
		}
		if !slices.Equal(have, want) {
			out = append(out, fmt.Sprintf("%s: the view's rows\n\t%s\nrecomputed from the raw tables\n\t%s", q.name,
				strings.Join(have, "\n\t"), strings.Join(want, "\n\t")))
		}
	}
	return out
}
