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

// The people of a gate-reason cell are exact whatever the seal has done: counted from the raw
// rows while an hour is unsealed or its seal is out of date, from the sealed count while its
// calls equal the rollup's. A seal covers closed hours only, and a late event (or a raw row
// whose rollup row has not landed yet) sends its hour back to the raw rows until sealed again.
func TestGateReasonPeopleAreExactBeforeAndAfterSeals(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	ctx := context.Background()
	ch := env.ClickHouse
	for _, tbl := range []string{"tool_calls", "gate_reason_calls_hourly", "gate_reason_people_sealed"} {
		if err := ch.Exec(ctx, "TRUNCATE TABLE mcpulse."+tbl); err != nil {
			t.Fatal(err)
		}
	}
	hourA := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	hourB := hourA.Add(time.Hour)
	seq := 0
	// call stores one raw tool call of person in the cell (hour, c1, session_too_young,
	// cursor, url unknown, form yes), stored twice when twice (a redelivered row).
	call := func(hour time.Time, person string, twice bool) {
		t.Helper()
		seq++
		n := 1
		if twice {
			n = 2
		}
		for range n {
			if err := ch.Exec(ctx, `INSERT INTO mcpulse.tool_calls (uuid, timestamp, distinct_id, tool_name, client_name,
    recruitment_reason, url_supported, form_supported, campaign_id, inserted_at)
SELECT toUUID(concat('00000000-0000-4000-8000-', substring(toString(1000000000000 + ?), 2, 12))),
    toDateTime(?, 'UTC'), ?, 'search', 'cursor', 'session_too_young', NULL, 1, 'c1', now()`,
				seq, hour.Add(time.Duration(seq)*time.Second).Unix(), person); err != nil {
				t.Fatal(err)
			}
		}
	}
	version := uint64(0)
	// counted writes the consumer's cumulative calls of the cell in hour, as of a new version.
	counted := func(hour time.Time, calls uint64) {
		t.Helper()
		version++
		if err := ch.Exec(ctx, `INSERT INTO mcpulse.gate_reason_calls_hourly (kafka_topic, kafka_partition, hour, campaign_id,
    reason, client_name, url_support, form_support, calls, as_of, before, before_as_of, version)
SELECT 'mcp_tool_calls', 0, toDateTime(?, 'UTC'), 'c1', 'session_too_young', 'cursor', 2, 1, ?, ?, [], 0, ?`,
			hour.Unix(), calls, int64(version), version); err != nil {
			t.Fatal(err)
		}
	}
	check := func(when string, wantUnsealed []time.Time, wantPeople map[time.Time]uint64) {
		t.Helper()
		mismatches, err := report.RollupMismatches(ctx, ch)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mismatches {
			if strings.HasPrefix(m, "gate_reasons:") { // the test writes no other rollup
				t.Errorf("%s: %s", when, m)
			}
		}
		if got := hours(t, ch, "SELECT hour FROM mcpulse.v_gate_reason_unsealed_hours ORDER BY hour"); !slices.Equal(got, wantUnsealed) {
			t.Errorf("%s: unsealed hours %v, want %v", when, got, wantUnsealed)
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
		res, err := rollup.SealGateReasonPeople(ctx, ch, now)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(res.Hours, want) {
			t.Errorf("seal at %s sealed %v, want %v", now.Format(time.DateTime), res.Hours, want)
		}
	}

	// Hour A: 30 calls of 7 people (one row stored twice); hour B: 10 calls of 3 people.
	for i := range 30 {
		call(hourA, []string{"p0", "p1", "p2", "p3", "p4", "p5", "p6"}[i%7], i == 4)
	}
	for i := range 10 {
		call(hourB, []string{"p0", "q1", "q2"}[i%3], false)
	}
	counted(hourA, 30)
	counted(hourB, 10)
	check("before any seal", []time.Time{hourA, hourB}, map[time.Time]uint64{hourA: 7, hourB: 3})

	// At B + 1h05 only A is closed (an hour gets an hour after its end).
	seal(hourB.Add(time.Hour+5*time.Minute), []time.Time{hourA})
	check("A sealed", []time.Time{hourB}, map[time.Time]uint64{hourA: 7, hourB: 3})
	seal(hourB.Add(2*time.Hour+5*time.Minute), []time.Time{hourB})
	check("both sealed", nil, map[time.Time]uint64{hourA: 7, hourB: 3})
	seal(hourB.Add(3*time.Hour), nil)

	// A late call of a new person in A: counted from the raw rows until sealed again.
	call(hourA, "late", false)
	counted(hourA, 31)
	check("late call in A", []time.Time{hourA}, map[time.Time]uint64{hourA: 8, hourB: 3})
	seal(hourB.Add(3*time.Hour), []time.Time{hourA})
	check("A sealed again", nil, map[time.Time]uint64{hourA: 8, hourB: 3})

	// Hour C's third call is stored raw, its batch's rollup row not yet (the consumer stores
	// raw rows first): the seal counts 3 calls, the rollup 2, so the sealed count is not used
	// (C stays unsealed, read from the raw rows) until the rollup catches up.
	hourC := hourB.Add(time.Hour)
	call(hourC, "r1", false)
	call(hourC, "r2", false)
	counted(hourC, 2)
	call(hourC, "r3", false)
	seal(hourC.Add(2*time.Hour), []time.Time{hourC})
	if got := hours(t, ch, "SELECT hour FROM mcpulse.v_gate_reason_unsealed_hours"); !slices.Equal(got, []time.Time{hourC}) {
		t.Errorf("unsealed hours %v while the rollup still says 2 calls, want [%s]", got, hourC.Format(time.DateTime))
	}
	counted(hourC, 3)
	check("rollup caught up", nil, map[time.Time]uint64{hourA: 8, hourB: 3, hourC: 3})
	var sealedRows uint64
	if err := ch.QueryRow(ctx, "SELECT count() FROM mcpulse.gate_reason_people_sealed FINAL").Scan(&sealedRows); err != nil {
		t.Fatal(err)
	}
	if sealedRows != 3 {
		t.Errorf("gate_reason_people_sealed holds %d cells after merging, want 3 (one per hour)", sealedRows)
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
