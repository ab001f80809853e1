package dashboards

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/mcpulse/mcpulse/jobs"
	"github.com/mcpulse/mcpulse/testkit/testenv"
)

// insertToolCall stores one successful tool call the way the consumer's insert fills the
// rollups (the materialized views run on every insert); ignoredKey "" means none.
func insertToolCall(t *testing.T, ch driver.Conn, n int, at time.Time, tool, client, ignoredKey string) {
	t.Helper()
	err := ch.Exec(context.Background(), `INSERT INTO mcpulse.tool_calls
    (uuid, timestamp, tool_name, client_name, is_error, counted_ignored_keys, inserted_at)
SELECT toUUID(?), toDateTime(?, 'UTC'), ?, ?, 0, arrayFilter(k -> k != '', [?]), now()`,
		fmt.Sprintf("00000000-0000-4000-8000-%012d", n), at.Unix(), tool, client, ignoredKey)
	if err != nil {
		t.Fatal(err)
	}
}

// The ignored-key rate panels read the uniqExact states until the first seal, sealed counts
// for the hours before the watermark after it, and equal their raw-table equivalents at every
// step; a late tool call for a sealed hour is in the raw table at once and shows on the panels
// after the next seal, and a replayed call adds nothing.
func TestSealedHoursAreExactAsOfTheLastSeal(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	ch, ctx := env.ClickHouse, context.Background()
	now := time.Date(2026, 3, 10, 12, 30, 0, 0, time.UTC)
	sealedHour := time.Date(2026, 3, 10, 9, 0, 0, 0, time.UTC) // before the watermark, 11:00
	liveHour := time.Date(2026, 3, 10, 11, 0, 0, 0, time.UTC)  // from the watermark on
	insertToolCall(t, ch, 1, sealedHour.Add(5*time.Minute), "search", "claude-code", "filters.0.kind")
	insertToolCall(t, ch, 2, sealedHour.Add(10*time.Minute), "search", "claude-code", "")
	insertToolCall(t, ch, 3, sealedHour.Add(15*time.Minute), "search", "cursor", "")
	insertToolCall(t, ch, 4, liveHour.Add(5*time.Minute), "search", "cursor", "q")
	insertToolCall(t, ch, 5, liveHour.Add(20*time.Minute), "create", "claude-code", "")

	panels := []Panel{
		panelByID(t, "tool-diagnostics", "ignored-key-rate-over-time"),
		panelByID(t, "tool-diagnostics", "tools-by-ignored-key-rate"),
		panelByID(t, "tool-diagnostics", "schema-vs-ignored-key-rate"),
	}
	filters := []Filters{{Limit: MaxLimit, MinCalls: 1}, {Limit: MaxLimit, MinCalls: 1, Client: "claude-code"}, {Limit: MaxLimit, MinCalls: 1, Tool: "search"},
		{Limit: MaxLimit, MinCalls: 1, From: liveHour, To: now}}
	// equalsRaw checks every panel under every filter against its raw equivalent.
	equalsRaw := func(step string) {
		t.Helper()
		for _, p := range panels {
			for _, f := range filters {
				res, err := Run(ctx, ch, p, f)
				if err != nil {
					t.Fatal(err)
				}
				raw, err := runQuery(ctx, ch, p.RawQuery, f.Args(p))
				if err != nil {
					t.Fatal(err)
				}
				if len(res.Rows) == 0 {
					t.Errorf("%s: %s with %+v has no rows", step, p.ID, f)
				}
				if err := sameRows(res, raw); err != nil {
					t.Errorf("%s: %s with %+v differs from %s: %v", step, p.ID, f, p.RawQuery, err)
				}
			}
		}
	}
	// searchCalls is the search tool's (successful_calls, calls_with_ignored_keys) on the ranked panel.
	ranked := panels[1]
	searchCalls := func() [2]float64 {
		t.Helper()
		res := run2(t, ch, ranked, Filters{Limit: MaxLimit, MinCalls: 1, Tool: "search"})
		if len(res.Rows) != 1 {
			t.Fatalf("ranked panel for search: %v", res.Rows)
		}
		return [2]float64{num(res.Rows[0][col(t, res, "successful_calls")]), num(res.Rows[0][col(t, res, "calls_with_ignored_keys")])}
	}
	count := func(q string) uint64 {
		t.Helper()
		var n uint64
		if err := ch.QueryRow(ctx, q).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	// Before any seal: nothing sealed, everything from the states.
	if n := count(`SELECT count() FROM mcpulse.ignored_key_rates_hourly_sealed`) + count(`SELECT count() FROM mcpulse.rollup_seals`); n != 0 {
		t.Fatalf("%d sealed rows before the first seal", n)
	}
	equalsRaw("before sealing")
	if got := searchCalls(); got != [2]float64{4, 2} {
		t.Errorf("before sealing: search has %v calls, calls with ignored keys; want [4 2]", got)
	}

	res, err := jobs.SealIgnoredKeyRates(ctx, ch, now)
	if err != nil {
		t.Fatal(err)
	}
	if !res.SealedThrough.Equal(liveHour) {
		t.Errorf("sealed through %v, want %v", res.SealedThrough, liveHour)
	}
	// Only the hours before the watermark are sealed: 9:00 search × two clients.
	if n := count(`SELECT count() FROM mcpulse.ignored_key_rates_hourly_sealed FINAL`); n != 2 {
		t.Errorf("%d sealed keys, want 2", n)
	}
	if n := count(`SELECT count() FROM mcpulse.ignored_key_rates_hourly_sealed FINAL WHERE hour >= toDateTime('2026-03-10 11:00:00', 'UTC')`); n != 0 {
		t.Errorf("%d keys sealed at or after the watermark", n)
	}
	equalsRaw("after the first seal")

	// A late call for the sealed hour, and a replay of an old one: the raw table has the late
	// call at once, the panels read the sealed hour as of the last seal.
	insertToolCall(t, ch, 6, sealedHour.Add(40*time.Minute), "search", "claude-code", "limit")
	insertToolCall(t, ch, 1, sealedHour.Add(5*time.Minute), "search", "claude-code", "filters.0.kind")
	if got := searchCalls(); got != [2]float64{4, 2} {
		t.Errorf("late call before the next seal: search has %v; want the sealed [4 2]", got)
	}
	raw, err := runQuery(ctx, ch, ranked.RawQuery, Filters{Limit: MaxLimit, MinCalls: 1, Tool: "search"}.Args(ranked))
	if err != nil {
		t.Fatal(err)
	}
	if len(raw.Rows) != 1 || num(raw.Rows[0][col(t, raw, "successful_calls")]) != 5 {
		t.Errorf("raw table after the late call: %v, want 5 search calls", raw.Rows)
	}

	// The next seal picks it up; sealing again at the same time changes nothing.
	for range 2 {
		if _, err := jobs.SealIgnoredKeyRates(ctx, ch, now.Add(5*time.Minute)); err != nil {
			t.Fatal(err)
		}
		if got := searchCalls(); got != [2]float64{5, 3} {
			t.Errorf("after the next seal: search has %v; want [5 3]", got)
		}
		equalsRaw("after the next seal")
	}
}

// run2 is run on another connection than the shared demo's.
func run2(t *testing.T, ch driver.Conn, p Panel, f Filters) *Result {
	t.Helper()
	res, err := Run(context.Background(), ch, p, f)
	if err != nil {
		t.Fatal(err)
	}
	return res
}
