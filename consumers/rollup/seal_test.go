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
	r := newSealRig(t)
	ctx, ch := r.ctx, r.ch
	hourA := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	hourB := hourA.Add(time.Hour)
	seq := 0
	// call stores one raw tool call of person that ignored key "limit" (and "sort" when seq is
	// even), stored twice when twice (a redelivered row).
	call := func(hour time.Time, person string, twice bool) {
		t.Helper()
		seq++
		keys := []string{"limit"}
		if seq%2 == 0 {
			keys = append(keys, "sort")
		}
		r.raw(hour, seq, person, keys)
		if twice {
			r.raw(hour, seq, person, keys)
		}
	}
	// counted writes partition 0's totals of hour, its calls and their "limit" keys alike.
	counted := func(hour time.Time, events, calls, sorts uint64) {
		t.Helper()
		r.counted(hour, events, calls, calls, sorts)
	}
	check := func(when string, wantUnsealed []time.Time, wantPeople map[time.Time]uint64) {
		t.Helper()
		r.recomputed(when)
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
	r.cells(1, hourA, 5, 5, 0)
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
	r := newSealRig(t)
	ctx, ch := r.ctx, r.ch
	hour := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	raw := func(n int, keys []string) {
		t.Helper()
		r.raw(hour, n, "p1", keys)
	}
	// counted writes partition 0's totals of the hour; every call has the gate reason.
	counted := func(events, limits, sorts uint64) {
		t.Helper()
		r.counted(hour, events, events, limits, sorts)
	}
	check := r.recomputed
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

// sealRig is a ClickHouse whose raw and rollup tables a seal test writes as the consumer would,
// for tool "search" and one gate-reason cell (campaign c1, session_too_young, client cursor,
// URL support unknown, form support yes): every call has the gate reason and ignores key
// "limit", some also "sort".
type sealRig struct {
	t       *testing.T
	ctx     context.Context
	ch      driver.Conn
	version uint64 // of the rollup rows written last
}

// newSealRig empties the tables a seal reads and writes.
func newSealRig(t *testing.T) *sealRig {
	r := &sealRig{t: t, ctx: context.Background(), ch: testenv.New(t, testenv.Options{}).ClickHouse}
	for _, tbl := range []string{"tool_calls", "gate_reason_calls_hourly", "gate_reason_people_sealed", "ignored_key_paths_hourly",
		"ignored_key_paths_sealed", "events_by_name_hourly", "rollup_sealed_hours"} {
		if err := r.ch.Exec(r.ctx, "TRUNCATE TABLE mcpulse."+tbl); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// raw stores raw tool call n (its uuid, and its second in hour) of person, ignoring keys.
func (r *sealRig) raw(hour time.Time, n int, person string, keys []string) {
	r.t.Helper()
	if err := r.ch.Exec(r.ctx, `INSERT INTO mcpulse.tool_calls (uuid, timestamp, distinct_id, tool_name, client_name,
    recruitment_reason, url_supported, form_supported, campaign_id, counted_ignored_keys, ignored_keys_source, inserted_at)
SELECT toUUID(concat('00000000-0000-4000-8000-', substring(toString(1000000000000 + ?), 2, 12))),
    toDateTime(?, 'UTC'), ?, 'search', 'cursor', 'session_too_young', NULL, 1, 'c1', ?, 'schema', now()`,
		n, hour.Add(time.Duration(n)*time.Second).Unix(), person, keys); err != nil {
		r.t.Fatal(err)
	}
}

// counted writes partition 0's cumulative totals of hour as of a new version: its
// $mcp_tool_call events (events_by_name_hourly), and its cells (cells).
func (r *sealRig) counted(hour time.Time, events, calls, limits, sorts uint64) {
	r.t.Helper()
	r.cells(0, hour, calls, limits, sorts)
	r.insert("events_by_name_hourly", "event, events", "'$mcp_tool_call'", 0, hour, events)
}

// cells writes partition p's cumulative totals of hour's cells as of a new version: the gate-
// reason calls, and the calls that ignored "limit" and "sort" (ignored_key_paths_hourly).
func (r *sealRig) cells(p int32, hour time.Time, calls, limits, sorts uint64) {
	r.t.Helper()
	r.version++
	r.insert("gate_reason_calls_hourly", "campaign_id, reason, client_name, url_support, form_support, calls",
		"'c1', 'session_too_young', 'cursor', 2, 1", p, hour, calls)
	paths := "tool_name, server_name, server_version, key_path, occurrences"
	r.insert("ignored_key_paths_hourly", paths, "'search', '', '', 'limit'", p, hour, limits)
	r.insert("ignored_key_paths_hourly", paths, "'search', '', '', 'sort'", p, hour, sorts)
}

// insert writes one rollup row of table: the dimension values dims, then total, in columns
// (the dimensions after hour, then the measure), for partition p and hour, as of r.version.
func (r *sealRig) insert(table, columns, dims string, p int32, hour time.Time, total uint64) {
	r.t.Helper()
	q := "INSERT INTO mcpulse." + table + " (kafka_topic, kafka_partition, hour, " + columns + `, as_of, before, before_as_of, version)
SELECT 'mcp_tool_calls', ?, toDateTime(?, 'UTC'), ` + dims + ", ?, ?, [], 0, ?"
	if err := r.ch.Exec(r.ctx, q, p, hour.Unix(), total, int64(r.version), r.version); err != nil {
		r.t.Fatal(err)
	}
}

// recomputed reports, as of when, every rollup that differs from its recomputation from the raw
// rows (tool_call_stats_hourly aside: the tests write none of its rows).
func (r *sealRig) recomputed(when string) {
	r.t.Helper()
	mismatches, err := report.RollupMismatches(r.ctx, r.ch)
	if err != nil {
		r.t.Fatal(err)
	}
	for _, m := range mismatches {
		if !strings.HasPrefix(m, "tool_call_stats:") {
			r.t.Errorf("%s: %s", when, m)
		}
	}
}
