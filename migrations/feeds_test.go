package migrations_test

import (
	"context"
	"reflect"
	"slices"
	"testing"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/mcpulse/mcpulse/internal/stores"
	"github.com/mcpulse/mcpulse/migrations"
	"github.com/mcpulse/mcpulse/stack"
)

// describe returns a table's columns as DESCRIBE lists them: name and type, in order.
// DESCRIBE lists columns in order on every version (18.16's system.columns has no position);
// newer releases add trailing fields, so it scans however many there are.
func describe(t *testing.T, ctx context.Context, ch driver.Conn, table string) [][2]string {
	t.Helper()
	rows, err := ch.Query(ctx, "DESCRIBE TABLE "+table)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got [][2]string
	for rows.Next() {
		fields := make([]string, len(rows.Columns()))
		dest := make([]any, len(fields))
		for i := range fields {
			dest[i] = &fields[i]
		}
		if err := rows.Scan(dest...); err != nil {
			t.Fatal(err)
		}
		got = append(got, [2]string{fields[0], fields[1]})
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return got
}

// After every migration no materialized view reads a raw table (a replicated server that drops
// a replayed part skips its views: DESIGN.md §5), each view that did reads its feed, and each
// feed (migrations.ViewFeeds) has exactly its raw table's columns, in order: the consumer
// inserts a batch's rows into both with one column list.
func TestViewFeedsHaveTheirRawTablesColumnsAndNoViewReadsARawTable(t *testing.T) {
	s := stack.ForTest(t)
	ctx := context.Background()
	ch, err := stores.OpenClickHouse(ctx, s.ClickHouseDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	if _, err := migrations.Up(ctx, ch, nil); err != nil {
		t.Fatal(err)
	}
	views := map[string][]string{} // by the table they read
	rows, err := ch.Query(ctx, "SELECT name, dependencies_table FROM system.tables WHERE database = ?", migrations.Database)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var name string
		var deps []string
		if err := rows.Scan(&name, &deps); err != nil {
			t.Fatal(err)
		}
		views[name] = deps
	}
	rows.Close()
	for _, raw := range migrations.RawTables {
		if _, ok := views[raw]; !ok {
			t.Errorf("raw table %s does not exist", raw)
		}
		if len(views[raw]) > 0 {
			t.Errorf("materialized views %v read raw table %s", views[raw], raw)
		}
	}
	want := map[string][]string{
		"tool_calls_feed":         {"cardinality_overflow_clients_mv", "cardinality_overflow_key_paths_mv", "cardinality_overflow_tools_mv"},
		"recruitment_events_feed": {"recruitment_funnel_daily_mv"},
	}
	for raw, feed := range migrations.ViewFeeds {
		got := slices.Sorted(slices.Values(views[feed]))
		if !reflect.DeepEqual(got, want[feed]) {
			t.Errorf("%s is read by %v, want %v", feed, got, want[feed])
		}
		rawCols, feedCols := describe(t, ctx, ch, migrations.Database+"."+raw), describe(t, ctx, ch, migrations.Database+"."+feed)
		if len(rawCols) == 0 || !reflect.DeepEqual(rawCols, feedCols) {
			t.Errorf("%s columns differ from %s's: add a column added to one to the other\n%s: %v\n%s: %v", feed, raw, raw, rawCols, feed, feedCols)
		}
	}
	if len(migrations.ViewFeeds) != len(want) {
		t.Errorf("migrations.ViewFeeds holds %d feeds, the test %d", len(migrations.ViewFeeds), len(want))
	}
}
