package demo_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/redis/go-redis/v9"

	"github.com/mcpulse/mcpulse/consumers/rollup"
	"github.com/mcpulse/mcpulse/dashboards"
	"github.com/mcpulse/mcpulse/demo"
	"github.com/mcpulse/mcpulse/demo/report"
	"github.com/mcpulse/mcpulse/internal/stores"
	"github.com/mcpulse/mcpulse/migrations"
	mcsql "github.com/mcpulse/mcpulse/sql"
	"github.com/mcpulse/mcpulse/stack"
)

// mvTargets are the tables only materialized views fill from the raw tables' feeds
// (migrations.ViewFeeds): a copy of the raw rows into the feeds fills them anew, so they are
// not copied.
var mvTargets = []string{"recruitment_funnel_daily", "cardinality_overflow_hourly", "alert_state"}

// The demo on a sharded 2×2 cluster (Distributed tables over mcpulse_local): every figure
// matches the corpus's expected outcome, the rows of tool_calls are on both shards; the seal
// of the closed hours runs there (its deletes ON CLUSTER) and leaves every figure as it was;
// every query of sql/queries without parameters, and every panel's query and raw peer bound
// as the dashboards bind them, answers as one server holding the same rows does (the rows the
// cluster holds, copied into a single server's schema, whose materialized views fill the
// rollups they feed anew); and the consumer's drop of old batch markers and the lint-run
// retention remove their rows from every host.
func TestShardedClusterDemoAnswersAsOneServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cl, err := stack.Start(ctx, stack.Config{Shards: 2, Replicas: 2})
	stack.SkipOrFail(t, err)
	t.Cleanup(func() { cl.Close() })
	cc := cl.ClickHouseCluster

	summary, err := demo.Run(ctx, demo.Config{Events: 5000, Seed: 42, DataDir: t.TempDir(), Stack: cl})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range summary.Mismatches {
		t.Error(m)
	}
	if len(summary.ToolCallsPerShard) != 2 || slices.Contains(summary.ToolCallsPerShard, 0) {
		t.Errorf("tool_calls rows per shard %v, want rows on both shards", summary.ToolCallsPerShard)
	}
	t.Logf("tool_calls rows per shard: %v", summary.ToolCallsPerShard)

	host := func(i int) driver.Conn {
		conn, err := stores.OpenClickHouse(ctx, cc.Hosts[i].DSN)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return conn
	}
	hosts := make([]driver.Conn, len(cc.Hosts))
	for i := range hosts {
		hosts[i] = host(i)
	}
	first, last := hosts[0], hosts[len(hosts)-1]
	rdb, err := stores.OpenRedis(ctx, cl.RedisURL)
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	sealOnTheCluster(ctx, t, cc, first, rdb, hosts)
	again, err := migrations.UpWith(ctx, last, nil, migrations.Options{Cluster: cc.Name, Sharded: true})
	if err != nil || len(again) != 0 {
		t.Errorf("migrate again through %s: applied %d, %v; want up to date", cc.Hosts[len(cc.Hosts)-1].Name(), len(again), err)
	}
	orphans, err := names(ctx, last, `SELECT name FROM system.tables WHERE database = ? AND engine NOT IN ('View', 'MaterializedView')
		AND name NOT IN (SELECT name FROM system.tables WHERE database = ? AND engine = 'Distributed') ORDER BY name`,
		migrations.LocalDatabase, migrations.Database)
	if err != nil {
		t.Fatal(err)
	}
	if len(orphans) > 0 {
		t.Errorf("local tables without a Distributed table: %v", orphans)
	}

	single := stack.ForTest(t)
	one, err := stores.OpenClickHouse(ctx, single.ClickHouseDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	if _, err := migrations.Up(ctx, one, nil); err != nil {
		t.Fatal(err)
	}
	tables, err := names(ctx, first, "SELECT name FROM system.tables WHERE database = ? AND engine = 'Distributed' ORDER BY name", migrations.Database)
	if err != nil {
		t.Fatal(err)
	}
	remote := fmt.Sprintf("127.0.0.1:%d", cc.Hosts[0].TCPPort)
	feeds := map[string]bool{}
	for _, f := range migrations.ViewFeeds {
		feeds[f] = true
	}
	for _, tbl := range tables {
		if slices.Contains(mvTargets, tbl) || tbl == "served_tool_schemas_in" || feeds[tbl] { // a Null table holds nothing
			continue
		}
		q := fmt.Sprintf("INSERT INTO %s.%s SELECT * FROM remote('%s', %s.%s)", migrations.Database, tbl, remote, migrations.Database, tbl)
		if err := one.Exec(ctx, q); err != nil {
			t.Fatalf("copy %s: %v", tbl, err)
		}
		if feed, ok := migrations.ViewFeeds[tbl]; ok {
			// The views read the feed, not the raw table: its rows go through it too.
			q := fmt.Sprintf("INSERT INTO %s.%s SELECT * FROM remote('%s', %s.%s)", migrations.Database, feed, remote, migrations.Database, tbl)
			if err := one.Exec(ctx, q); err != nil {
				t.Fatalf("feed %s: %v", feed, err)
			}
		}
	}

	compared := 0
	for _, name := range mcsql.Names() {
		q := mcsql.Query(name)
		if strings.Contains(q, "?") {
			continue // parameters: the panels below; the reports read through the same tables
		}
		got, err := answer(ctx, first, q)
		if err != nil {
			t.Errorf("%s on the cluster: %v", name, err)
			continue
		}
		want, err := answer(ctx, one, q)
		if err != nil {
			t.Errorf("%s on one server: %v", name, err)
			continue
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: the cluster answers %d rows, one server %d; first difference:\n%s", name, len(got), len(want), firstDifference(got, want))
		}
		if len(want) > 0 {
			compared++
		}
	}
	if compared < 20 {
		t.Errorf("only %d queries answered rows on one server; want most of them to", compared)
	}
	t.Logf("%d queries of sql/queries give the same rows on the sharded cluster and one server", compared)

	// Every panel's query and its raw_* peer, bound as dashboards.Run binds them: all rows,
	// and a range, client and tool narrowed to rows the corpus holds.
	ds, err := dashboards.Load()
	if err != nil {
		t.Fatal(err)
	}
	var client, tool string
	if err := one.QueryRow(ctx, `SELECT
    (SELECT any(client_name) FROM mcpulse.tool_calls WHERE client_name != ''),
    (SELECT any(tool_name) FROM mcpulse.tool_calls WHERE notEmpty(counted_ignored_keys))`).Scan(&client, &tool); err != nil {
		t.Fatal(err)
	}
	end := time.Now().UTC().Truncate(time.Hour)
	filters := []dashboards.Filters{{}, {From: end.Add(-36 * time.Hour), To: end.Add(-2 * time.Hour), Client: client, Tool: tool, Limit: 3}}
	bound, boundRows := 0, 0
	for _, d := range ds {
		for _, p := range d.Panels {
			for _, name := range []string{p.Query, p.RawQuery} {
				if name == "" {
					continue
				}
				for i, f := range filters {
					args := f.Args(p)
					what := fmt.Sprintf("%s (panel %s/%s, filters #%d)", name, d.Name, p.ID, i)
					got, err := answer(ctx, first, mcsql.Query(name), args...)
					if err != nil {
						t.Errorf("%s on the cluster: %v", what, err)
						continue
					}
					want, err := answer(ctx, one, mcsql.Query(name), args...)
					if err != nil {
						t.Errorf("%s on one server: %v", what, err)
						continue
					}
					if !slices.Equal(got, want) {
						t.Errorf("%s: the cluster answers %d rows, one server %d; first difference:\n%s", what, len(got), len(want), firstDifference(got, want))
					}
					bound++
					if len(want) > 0 {
						boundRows++
					}
				}
			}
		}
	}
	if boundRows < bound/2 {
		t.Errorf("only %d of %d bound panel queries answered rows on one server", boundRows, bound)
	}
	t.Logf("%d bound panel and raw queries give the same rows on the sharded cluster and one server (%d with rows)", bound, boundRows)

	dropOldMarkersOnTheCluster(ctx, t, first, hosts)
	expireLintRunsOnTheCluster(ctx, t, first, end)
}

// sealOnTheCluster runs the seal of the closed hours through the first host of the sharded
// cluster after the demo: it seals hours, every figure the demo reads back (report.Observe)
// is unchanged and every rollup still equals its recomputation from the raw rows, readers
// take the sealed hours from the sealed tables, and the per-partition rows of the sealed
// hours are gone from the local tables of every host (deleted ON CLUSTER).
func sealOnTheCluster(ctx context.Context, t *testing.T, cc *stack.ClickHouseCluster, first driver.Conn, rdb redis.UniversalClient, hosts []driver.Conn) {
	t.Helper()
	before, err := report.Observe(ctx, first, rdb)
	if err != nil {
		t.Fatal(err)
	}
	if m, err := report.RollupMismatches(ctx, first); err != nil || len(m) > 0 {
		t.Errorf("before the seal, the rollups differ from their recomputation (%v): %v", err, m)
	}
	began := time.Now()
	sealed, err := rollup.SealClosedHours(ctx, first, time.Now())
	if err != nil {
		t.Fatalf("seal on the sharded cluster: %v", err)
	}
	took := time.Since(began)
	if len(sealed.Hours) == 0 {
		t.Fatal("the seal sealed no hour")
	}
	t.Logf("seal on the sharded cluster: %d hours in %s", len(sealed.Hours), took.Round(time.Millisecond))
	var current uint64
	if err := first.QueryRow(ctx, "SELECT count() FROM mcpulse.v_rollup_sealed_hours WHERE current").Scan(&current); err != nil {
		t.Fatal(err)
	}
	if current != uint64(len(sealed.Hours)) {
		t.Errorf("%d sealed hours current, want the %d sealed", current, len(sealed.Hours))
	}
	after, err := report.Observe(ctx, first, rdb)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(before, after) {
		a, _ := json.Marshal(before)
		b, _ := json.Marshal(after)
		t.Errorf("the figures changed with the seal:\n%s", diffLines(string(a), string(b)))
	}
	if m, err := report.RollupMismatches(ctx, first); err != nil || len(m) > 0 {
		t.Errorf("after the seal, the rollups differ from their recomputation (%v): %v", err, m)
	}
	// The seal waited for its deletes on one replica of each shard; the other replicas apply
	// the replicated mutation on their own, soon after.
	for i, h := range hosts {
		var left uint64
		deadline := time.Now().Add(30 * time.Second)
		for {
			err := h.QueryRow(ctx, `SELECT
    (SELECT count() FROM mcpulse_local.ignored_key_paths_hourly WHERE hour IN (SELECT hour FROM mcpulse.rollup_sealed_hours))
  + (SELECT count() FROM mcpulse_local.gate_reason_calls_hourly WHERE hour IN (SELECT hour FROM mcpulse.rollup_sealed_hours))`).Scan(&left)
			if err != nil {
				t.Fatal(err)
			}
			if left == 0 || time.Now().After(deadline) {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		if left > 0 {
			t.Errorf("%s: %d per-partition rows of sealed hours left in its local tables 30 s after the seal", cc.Hosts[i].Name(), left)
		}
	}
}

// dropOldMarkersOnTheCluster begins a rollup store two blocks of epochs after the demo's
// consumer (epoch 2048): its housekeeping drops the demo's batch markers (block 0) from the
// local rollup_batches of every host.
func dropOldMarkersOnTheCluster(ctx context.Context, t *testing.T, first driver.Conn, hosts []driver.Conn) {
	t.Helper()
	old := func(h driver.Conn) uint64 {
		var n uint64
		if err := h.QueryRow(ctx, "SELECT count() FROM mcpulse_local.rollup_batches WHERE epoch < 1024").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	var markers uint64
	for _, h := range hosts {
		markers += old(h)
	}
	if markers == 0 {
		t.Fatal("no batch marker of block 0 on any host before the drop")
	}
	if err := first.Exec(ctx, "INSERT INTO mcpulse.rollup_epochs_taken (name, epoch, taken_at) SELECT 'rollups', 2047, now()"); err != nil {
		t.Fatal(err)
	}
	var logged strings.Builder
	store := rollup.NewStore(first, rollup.Tables(), 1<<20, slog.New(slog.NewTextHandler(&logged, nil)))
	if err := store.Begin(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if store.Epoch() != 2048 {
		t.Fatalf("took epoch %d, want 2048", store.Epoch())
	}
	for i, h := range hosts {
		if n := old(h); n > 0 {
			t.Errorf("host %d: %d batch markers of block 0 left after a generation in block 2", i+1, n)
		}
	}
	if strings.Contains(logged.String(), "not dropped") {
		t.Errorf("the store logged:\n%s", logged.String())
	}
	t.Logf("dropped %d batch markers of block 0 (rows over all hosts)", markers)
}

// expireLintRunsOnTheCluster records the demo's campaign lint runs again 60 days after the
// corpus's end: the lint retention (30 days) deletes the demo's runs, ON CLUSTER.
func expireLintRunsOnTheCluster(ctx context.Context, t *testing.T, first driver.Conn, end time.Time) {
	t.Helper()
	count := func() uint64 {
		var n uint64
		if err := first.QueryRow(ctx, "SELECT count() FROM mcpulse.campaign_lint_runs WHERE run_at <= ?", end).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if count() == 0 {
		t.Fatal("no campaign lint run before the corpus's end to expire")
	}
	if _, err := demo.RecordCampaignLint(ctx, first, end.Add(60*24*time.Hour)); err != nil {
		t.Fatalf("campaign lint runs with their retention on the sharded cluster: %v", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	n := count()
	for n > 0 && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
		n = count()
	}
	if n > 0 {
		t.Errorf("%d expired campaign lint runs left 30 s after the retention's delete", n)
	}
}

// diffLines lists the lines of two JSON texts (split at commas) that differ, at most 10.
func diffLines(a, b string) string {
	var out []string
	for _, d := range differences(strings.Split(a, ","), strings.Split(b, ","), 10) {
		out = append(out, "- "+d[0]+"\n+ "+d[1])
	}
	return strings.Join(out, "\n")
}

// differences returns the first n pairs of lines at the same place in a and b that differ
// (a missing line is "").
func differences(a, b []string, n int) [][2]string {
	var out [][2]string
	for i := 0; i < max(len(a), len(b)) && len(out) < n; i++ {
		var x, y string
		if i < len(a) {
			x = a[i]
		}
		if i < len(b) {
			y = b[i]
		}
		if x != y {
			out = append(out, [2]string{x, y})
		}
	}
	return out
}

// answer runs q with args and returns its rows, each formatted as text (floats to 9 significant
// digits: a sum over shards may differ from one server's in its last bits), sorted.
func answer(ctx context.Context, conn driver.Conn, q string, args ...any) ([]string, error) {
	rows, err := conn.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	types := rows.ColumnTypes()
	var out []string
	for rows.Next() {
		vals := make([]any, len(types))
		for i, ct := range types {
			vals[i] = reflect.New(ct.ScanType()).Interface()
		}
		if err := rows.Scan(vals...); err != nil {
			return nil, err
		}
		fields := make([]string, len(vals))
		for i, v := range vals {
			e := reflect.ValueOf(v).Elem()
			for e.Kind() == reflect.Pointer && !e.IsNil() {
				e = e.Elem() // Nullable columns scan into pointers
			}
			switch x := e.Interface().(type) {
			case float64:
				fields[i] = strconv.FormatFloat(x, 'g', 9, 64)
			case float32:
				fields[i] = strconv.FormatFloat(float64(x), 'g', 9, 32)
			default:
				fields[i] = fmt.Sprint(x)
			}
		}
		out = append(out, strings.Join(fields, "\t"))
	}
	slices.Sort(out)
	return out, rows.Err()
}

// names returns the one String column of q's rows.
func names(ctx context.Context, conn driver.Conn, q string, args ...any) ([]string, error) {
	rows, err := conn.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// firstDifference shows the first row the cluster and one server answer differently.
func firstDifference(got, want []string) string {
	for _, d := range differences(got, want, 1) {
		return "  cluster:    " + d[0] + "\n  one server: " + d[1]
	}
	return ""
}
