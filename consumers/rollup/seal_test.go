package rollup_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/mcpulse/mcpulse/consumers/rollup"
	"github.com/mcpulse/mcpulse/demo/report"
	"github.com/mcpulse/mcpulse/testkit/testenv"
)

// A closed hour's rollups are exact whatever the seal has done (migration 0037): read from the
// per-partition rows while the hour is unsealed, from the sealed cells while the seal's count
// of tool calls equals the rollups', and from the raw rows when a late event (or a raw row
// whose rollup rows have not landed yet) made the seal out of date, until the next seal. A
// seal covers closed hours only, and deletes the per-partition rows of the ignored key paths
// and gate-reason calls of the hours it sealed.
func TestSealedHoursAreExactBeforeAndAfterSeals(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	ctx := context.Background()
	ch := env.ClickHouse
	for _, tbl := range []string{"tool_calls", "gate_reason_calls_hourly", "gate_reason_people_sealed", "ignored_key_paths_hourly",
		"ignored_key_paths_sealed", "events_by_name_hourly", "rollup_sealed_hours"} {
		if err := ch.Exec(ctx, "TRUNCATE TABLE mcpulse."+tbl); err != nil {
			t.Fatal(err)
		}
	}
	hourA := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	hourB := hourA.Add(time.Hour)
	seq := 0
	// call stores one raw tool call of person in the cell (hour, c1, session_too_young,
	// cursor, url unknown, form yes) that ignored key "limit" (and "sort" when seq is even),
	// stored twice when twice (a redelivered row).
	call := func(hour time.Time, person string, twice bool) {
		t.Helper()
		seq++
		n := 1
		if twice {
			n = 2
		}
		for range n {
			if err := ch.Exec(ctx, `INSERT INTO mcpulse.tool_calls (uuid, timestamp, distinct_id, tool_name, client_name,
    recruitment_reason, url_supported, form_supported, campaign_id, counted_ignored_keys, ignored_keys_source, inserted_at)
SELECT toUUID(concat('00000000-0000-4000-8000-', substring(toString(1000000000000 + ?), 2, 12))),
    toDateTime(?, 'UTC'), ?, 'search', 'cursor', 'session_too_young', NULL, 1, 'c1',
    if(? % 2 = 0, ['limit', 'sort'], ['limit']), 'schema', now()`,
				seq, hour.Add(time.Duration(seq)*time.Second).Unix(), person, seq); err != nil {
				t.Fatal(err)
			}
		}
	}
	version := uint64(0)
	// counted writes the consumer's cumulative totals of hour as of a new version, as partition
	// 0 would for calls of the cells above: the events, and the calls, their "limit" and "sort"
	// keys (which equal the events unless the consumer's totals of a sealed hour restarted).
	counted := func(hour time.Time, events, calls, sorts uint64) {
		t.Helper()
		version++
		rows := []struct {
			table, dims string
			total       uint64
		}{
			{"events_by_name_hourly (kafka_topic, kafka_partition, hour, event", "'$mcp_tool_call'", events},
			{"gate_reason_calls_hourly (kafka_topic, kafka_partition, hour, campaign_id, reason, client_name, url_support, form_support",
				"'c1', 'session_too_young', 'cursor', 2, 1", calls},
			{"ignored_key_paths_hourly (kafka_topic, kafka_partition, hour, tool_name, server_name, server_version, key_path",
				"'search', '', '', 'limit'", calls},
			{"ignored_key_paths_hourly (kafka_topic, kafka_partition, hour, tool_name, server_name, server_version, key_path",
				"'search', '', '', 'sort'", sorts},
		}
		for _, r := range rows {
			q := "INSERT INTO mcpulse." + r.table + ", " + measure(r.table) + `, as_of, before, before_as_of, version)
SELECT 'mcp_tool_calls', 0, toDateTime(?, 'UTC'), ` + r.dims + ", ?, ?, [], 0, ?"
			if err := ch.Exec(ctx, q, hour.Unix(), r.total, int64(version), version); err != nil {
				t.Fatal(err)
			}
		}
	}
	check := func(when string, wantUnsealed []time.Time, wantPeople map[time.Time]uint64) {
		t.Helper()
		mismatches, err := report.RollupMismatches(ctx, ch)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mismatches {
			if !strings.HasPrefix(m, "tool_call_stats:") { // the test writes no tool_call_stats_hourly row
				t.Errorf("%s: %s", when, m)
			}
		}
		if got := hours(t, ch, "SELECT hour FROM mcpulse.v_rollup_unsealed_hours ORDER BY hour"); !slices.Equal(got, wantUnsealed) {
			t.Errorf("%s: hours read from the partitions' or the raw rows %v, want %v", when, got, wantUnsealed)
		}
		rows, err := ch.Query(ctx, "SELECT hour, people FROM mcpulse.v_gate_reasons_hourly")
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		got := map[time.Time]uint64{}
		for rows.Next() {
			var h time.Time
			var p uint64
			if err := rows.Scan(&h, &p); err != nil {
				t.Fatal(err)
			}
			got[h.UTC()] = p
		}
		for h, want := range wantPeople {
			if got[h] != want {
				t.Errorf("%s: people of %s = %d, want %d", when, h.Format(time.DateTime), got[h], want)
			}
		}
	}
	seal := func(now time.Time, want []time.Time) {
		t.Helper()
		res, err := rollup.SealClosedHours(ctx, ch, now)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(res.Hours, want) {
			t.Errorf("seal at %s sealed %v, want %v", now.Format(time.DateTime), res.Hours, want)
		}
	}
	// partitionRows says which hours still have per-partition rows in each table a seal empties.
	partitionRows := func(when string, want []time.Time) {
		t.Helper()
		for _, tbl := range []string{"gate_reason_calls_hourly", "ignored_key_paths_hourly"} {
			if got := hours(t, ch, "SELECT DISTINCT hour FROM mcpulse."+tbl+" ORDER BY hour"); !slices.Equal(got, want) {
				t.Errorf("%s: %s holds rows of hours %v, want %v", when, tbl, got, want)
			}
		}
	}

	// Hour A: 30 calls of 7 people (one row stored twice); hour B: 10 calls of 3 people.
	for i := range 30 {
		call(hourA, []string{"p0", "p1", "p2", "p3", "p4", "p5", "p6"}[i%7], i == 4)
	}
	for i := range 10 {
		call(hourB, []string{"p0", "q1", "q2"}[i%3], false)
	}
	counted(hourA, 30, 30, 15)
	counted(hourB, 10, 10, 5)
	check("before any seal", []time.Time{hourA, hourB}, map[time.Time]uint64{hourA: 7, hourB: 3})

	// At B + 1h05 only A is closed (an hour gets an hour after its end).
	seal(hourB.Add(time.Hour+5*time.Minute), []time.Time{hourA})
	check("A sealed", []time.Time{hourB}, map[time.Time]uint64{hourA: 7, hourB: 3})
	partitionRows("A sealed", []time.Time{hourB})
	seal(hourB.Add(2*time.Hour+5*time.Minute), []time.Time{hourB})
	check("both sealed", nil, map[time.Time]uint64{hourA: 7, hourB: 3})
	partitionRows("both sealed", nil)
	// Rows left in a sealed hour (as by a seal that failed between recording the hour and
	// deleting its rows) are deleted by the next seal, which has no hour to seal.
	for _, q := range []string{
		`INSERT INTO mcpulse.gate_reason_calls_hourly (kafka_topic, kafka_partition, hour, campaign_id, reason, client_name,
    url_support, form_support, calls, as_of, before, before_as_of, version)
SELECT 'mcp_tool_calls', 1, toDateTime(?, 'UTC'), 'c1', 'session_too_young', 'cursor', 2, 1, 5, 5, [], 0, 1`,
		`INSERT INTO mcpulse.ignored_key_paths_hourly (kafka_topic, kafka_partition, hour, tool_name, server_name, server_version,
    key_path, occurrences, as_of, before, before_as_of, version)
SELECT 'mcp_tool_calls', 1, toDateTime(?, 'UTC'), 'search', '', '', 'limit', 5, 5, [], 0, 1`,
	} {
		if err := ch.Exec(ctx, q, hourA.Unix()); err != nil {
			t.Fatal(err)
		}
	}
	check("rows left in a sealed hour", nil, map[time.Time]uint64{hourA: 7, hourB: 3})
	seal(hourB.Add(3*time.Hour), nil)
	partitionRows("the rows left deleted", nil)

	// A late call of a new person in A: the consumer writes A's totals on partition 0 again
	// (its cache still holds them), and readers take A from the raw rows until it is sealed
	// again, which deletes that row too.
	call(hourA, "late", false)
	counted(hourA, 31, 31, 15)
	check("late call in A", []time.Time{hourA}, map[time.Time]uint64{hourA: 8, hourB: 3})
	seal(hourB.Add(3*time.Hour), []time.Time{hourA})
	check("A sealed again", nil, map[time.Time]uint64{hourA: 8, hourB: 3})
	partitionRows("A sealed again", nil)

	// The same after the consumer lost its cache: its rows of the emptied tables for A then
	// count only the late calls (events_by_name_hourly keeps its rows), and no reader adds
	// them to the sealed cells.
	call(hourA, "later", false)
	call(hourA, "later", false)
	counted(hourA, 33, 2, 0)
	check("later calls in A", []time.Time{hourA}, map[time.Time]uint64{hourA: 9, hourB: 3})
	seal(hourB.Add(3*time.Hour), []time.Time{hourA})
	check("A sealed a third time", nil, map[time.Time]uint64{hourA: 9, hourB: 3})

	// Hour C's third call is stored raw, its batch's rollup rows not yet (the consumer stores
	// raw rows first): the seal counts 3 calls, the rollups 2, so C's sealed cells are not used
	// (C is read from the raw rows), nor once the rollups catch up (their rows changed since
	// the seal began), until the next seal seals C again.
	hourC := hourB.Add(time.Hour)
	call(hourC, "r1", false)
	call(hourC, "r2", false)
	counted(hourC, 2, 2, 1)
	call(hourC, "r3", false)
	seal(hourC.Add(2*time.Hour), []time.Time{hourC})
	if got := hours(t, ch, "SELECT hour FROM mcpulse.v_rollup_unsealed_hours"); !slices.Equal(got, []time.Time{hourC}) {
		t.Errorf("hours read from the raw rows %v while the rollups still count 2 calls in C, want [%s]", got, hourC.Format(time.DateTime))
	}
	counted(hourC, 3, 3, 1)
	check("rollups caught up", []time.Time{hourC}, map[time.Time]uint64{hourA: 9, hourB: 3, hourC: 3})
	seal(hourC.Add(2*time.Hour), []time.Time{hourC})
	check("C sealed again", nil, map[time.Time]uint64{hourA: 9, hourB: 3, hourC: 3})
	partitionRows("C sealed again", nil)
	for tbl, want := range map[string]uint64{"gate_reason_people_sealed": 3, "ignored_key_paths_sealed": 6, "rollup_sealed_hours": 3} {
		var n uint64
		if err := ch.QueryRow(ctx, "SELECT count() FROM mcpulse."+tbl+" FINAL").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != want {
			t.Errorf("%s holds %d rows after merging, want %d (one per hour and cell)", tbl, n, want)
		}
	}
}

// measure is the one measure column of the rollup table named at the start of table.
func measure(table string) string {
	switch {
	case strings.HasPrefix(table, "events_by_name_hourly"):
		return "events"
	case strings.HasPrefix(table, "gate_reason_calls_hourly"):
		return "calls"
	default:
		return "occurrences"
	}
}

func hours(t *testing.T, ch driver.Conn, q string) []time.Time {
	t.Helper()
	rows, err := ch.Query(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []time.Time
	for rows.Next() {
		var h time.Time
		if err := rows.Scan(&h); err != nil {
			t.Fatal(err)
		}
		out = append(out, h.UTC())
	}
	return out
}

// A replay may store a sealed hour's tool call again derived otherwise (the ignored keys a
// served schema yields depend on the schemas seen), the raw table keeping the newer row, while
// the hour's count of tool calls ends where it was: the batch's rollup rows were reset to their
// committed totals and written again. Readers must not keep taking the hour from the cells the
// seal recomputed from the older row, and the next seal must seal it again.
func TestSealedHourOfAReplayedCallDerivedOtherwise(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	ctx := context.Background()
	ch := env.ClickHouse
	for _, tbl := range []string{"tool_calls", "gate_reason_calls_hourly", "gate_reason_people_sealed", "ignored_key_paths_hourly",
		"ignored_key_paths_sealed", "events_by_name_hourly", "rollup_sealed_hours"} {
		if err := ch.Exec(ctx, "TRUNCATE TABLE mcpulse."+tbl); err != nil {
			t.Fatal(err)
		}
	}
	hour := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	// raw stores tool call n (its uuid and second in the hour) with the given counted ignored keys.
	raw := func(n int, keys []string) {
		t.Helper()
		if err := ch.Exec(ctx, `INSERT INTO mcpulse.tool_calls (uuid, timestamp, distinct_id, tool_name, client_name,
    recruitment_reason, url_supported, form_supported, campaign_id, counted_ignored_keys, ignored_keys_source, inserted_at)
SELECT toUUID(concat('00000000-0000-4000-8000-', substring(toString(1000000000000 + ?), 2, 12))),
    toDateTime(?, 'UTC'), 'p1', 'search', 'cursor', 'session_too_young', NULL, 1, 'c1', ?, 'schema', now()`,
			n, hour.Add(time.Duration(n)*time.Second).Unix(), keys); err != nil {
			t.Fatal(err)
		}
	}
	version := uint64(0)
	// counted writes partition 0's totals of the hour as of a new version.
	counted := func(events, limits, sorts uint64) {
		t.Helper()
		version++
		for _, r := range []struct {
			table, dims string
			total       uint64
		}{
			{"events_by_name_hourly (kafka_topic, kafka_partition, hour, event", "'$mcp_tool_call'", events},
			{"gate_reason_calls_hourly (kafka_topic, kafka_partition, hour, campaign_id, reason, client_name, url_support, form_support",
				"'c1', 'session_too_young', 'cursor', 2, 1", events},
			{"ignored_key_paths_hourly (kafka_topic, kafka_partition, hour, tool_name, server_name, server_version, key_path",
				"'search', '', '', 'limit'", limits},
			{"ignored_key_paths_hourly (kafka_topic, kafka_partition, hour, tool_name, server_name, server_version, key_path",
				"'search', '', '', 'sort'", sorts},
		} {
			q := "INSERT INTO mcpulse." + r.table + ", " + measure(r.table) + `, as_of, before, before_as_of, version)
SELECT 'mcp_tool_calls', 0, toDateTime(?, 'UTC'), ` + r.dims + ", ?, ?, [], 0, ?"
			if err := ch.Exec(ctx, q, hour.Unix(), r.total, int64(version), version); err != nil {
				t.Fatal(err)
			}
		}
	}
	check := func(when string) {
		t.Helper()
		mismatches, err := report.RollupMismatches(ctx, ch)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mismatches {
			if !strings.HasPrefix(m, "tool_call_stats:") { // the test writes no tool_call_stats_hourly row
				t.Errorf("%s: %s", when, m)
			}
		}
	}
	now := hour.Add(2*time.Hour + 5*time.Minute)

	// Two calls ignoring "limit", the second also "sort", stored and counted; the hour is sealed.
	raw(1, []string{"limit"})
	raw(2, []string{"limit", "sort"})
	counted(2, 2, 1)
	if res, err := rollup.SealClosedHours(ctx, ch, now); err != nil || len(res.Hours) != 1 {
		t.Fatalf("seal: %+v, %v; want the hour sealed", res, err)
	}
	check("sealed")

	// The batch of call 2 was never committed: a member takes the partition over, resets the
	// batch's cells to their committed totals and replays it, deriving call 2 as ignoring
	// "limit" alone (the schemas it has seen since say so).
	counted(1, 1, 0)
	raw(2, []string{"limit"})
	counted(2, 2, 0)
	check("replayed")
	// The next seal seals the hour again; the "sort" cell of the first seal is no longer read.
	if res, err := rollup.SealClosedHours(ctx, ch, now.Add(10*time.Minute)); err != nil || len(res.Hours) != 1 {
		t.Fatalf("seal after the replay: %+v, %v; want the hour sealed again", res, err)
	}
	check("sealed after the replay")
	if res, err := rollup.SealClosedHours(ctx, ch, now.Add(20*time.Minute)); err != nil || len(res.Hours) != 0 {
		t.Fatalf("seal with nothing changed: %+v, %v; want no hour sealed", res, err)
	}
	check("sealed with nothing changed")
}
