package migrations_test

import (
	"context"
	"testing"
	"time"

	"github.com/mcpulse/mcpulse/demo/report"
	"github.com/mcpulse/mcpulse/internal/stores"
	"github.com/mcpulse/mcpulse/migrations"
	"github.com/mcpulse/mcpulse/stack"
)

// cumulativeRollups is the migration that replaced the uniqExact rollups with cumulative
// counts and backfills them from the raw tables.
const cumulativeRollups = 15

// A database upgraded to the cumulative rollups holds, in them, exactly what its raw tables
// say: the backfill of migration 0015 equals the recomputation of every rollup (and the
// analyst views of 0003 keep answering over the new tables).
func TestCumulativeRollupsAreBackfilledFromTheRawTables(t *testing.T) {
	s := stack.ForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ch, err := stores.OpenClickHouse(ctx, s.ClickHouseDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	applyBelow(ctx, t, ch, cumulativeRollups)
	// Raw rows as the consumer left them before the upgrade: tool calls of every outcome and
	// derivation over several hours and servers (one stored twice), recruitment events, and
	// the SDK's other kinds.
	for _, q := range []string{
		`INSERT INTO mcpulse.tool_calls (uuid, timestamp, distinct_id, tool_name, client_name, server_name, server_version,
    is_error, duration_ms, ignored_keys, counted_ignored_keys, ignored_keys_source, ignored_keys_reason, error_class,
    unknown_tool, recruitment_reason, url_supported, form_supported, campaign_id, inserted_at)
SELECT toUUID(concat('00000000-0000-4000-8000-', substring(toString(1000000000000 + n), 2, 12))),
    toDateTime('2026-03-01 00:00:00', 'UTC') + (n) * 97, concat('user-', toString(n % 41)),
    ['search', 'create', 'list'][n % 3 + 1], ['cursor', 'claude-code', ''][n % 3 + 1],
    ['posthog', ''][n % 2 + 1], ['1.0', '1.1'][n % 2 + 1],
    toUInt8(n % 5 = 0), if(n % 4 = 0, NULL, (n % 113) * 7.25),
    if(n % 6 = 0, ['limit', 'limit', 'filters.0.kind'], emptyArrayString()), if(n % 6 = 0, ['limit', 'limit', 'filters.0.kind'], emptyArrayString()),
    ['reported', 'response', 'schema', 'not_measurable', ''][n % 5 + 1],
    if(n % 5 = 3, ['no_schema', 'arguments_truncated', 'root_union'][n % 3 + 1], ''),
    ['', 'validation_type', 'unknown_tool', 'other'][n % 4 + 1], toUInt8(n % 11 = 0),
    if(n % 3 = 0, 'session_too_young', ''), if(n % 7 = 0, NULL, toUInt8(n % 2)), NULL, 'c1', now()
FROM (SELECT number % 997 AS n FROM numbers(1100))`,
		`INSERT INTO mcpulse.recruitment_events (uuid, timestamp, kind, distinct_id, identity_hash, campaign_id,
    invitation_id, feature_flag, inserted_at)
SELECT generateUUIDv4(), toDateTime('2026-03-01 00:00:00', 'UTC') + number * 600,
    ['invitation_sent', 'link_opened', 'response'][number % 3 + 1], 'someone', 'hash', 'c1', toString(number), 'flag', now()
FROM numbers(40)`,
		`INSERT INTO mcpulse.mcp_initialize_events (uuid, timestamp, distinct_id, inserted_at)
SELECT generateUUIDv4(), toDateTime('2026-03-01 05:00:00', 'UTC') + number, 'someone', now() FROM numbers(7)`,
		`INSERT INTO mcpulse.other_events (uuid, timestamp, event, distinct_id, inserted_at)
SELECT generateUUIDv4(), toDateTime('2026-03-01 06:00:00', 'UTC') + number * 1000, ['$pageview', '$identify'][number % 2 + 1], 'someone', now()
FROM numbers(9)`,
	} {
		if err := ch.Exec(ctx, q); err != nil {
			t.Fatalf("seeding raw rows: %v\n%s", err, q)
		}
	}
	if _, err := migrations.Up(ctx, ch, nil); err != nil {
		t.Fatal(err)
	}
	mismatches, err := report.RollupMismatches(ctx, ch)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mismatches {
		t.Error(m)
	}
	var calls, successful uint64
	if err := ch.QueryRow(ctx, "SELECT sum(calls) FROM mcpulse.v_tool_call_stats_hourly").Scan(&calls); err != nil {
		t.Fatal(err)
	}
	if calls != 997 {
		t.Errorf("the backfilled rollup counts %d tool calls, want the 997 distinct ones", calls)
	}
	if err := ch.QueryRow(ctx, "SELECT sum(successful_calls) FROM mcpulse.v_ignored_key_rates_hourly").Scan(&successful); err != nil {
		t.Fatal(err)
	}
	if successful == 0 || successful >= calls {
		t.Errorf("v_ignored_key_rates_hourly counts %d successful calls of %d", successful, calls)
	}
}
