package rollup

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/mcpulse/mcpulse/migrations"
	mcsql "github.com/mcpulse/mcpulse/sql"
)

// SealHoursPerInsert is how many hours one seal INSERT recomputes at most, so a long backlog
// (a first seal, a replay of old events) is sealed in inserts of bounded memory.
const SealHoursPerInsert = 24

// sealedTables are the rollup tables whose per-partition rows a seal deletes once their hours
// are sealed (migration 0037). tool_call_stats_hourly and events_by_name_hourly keep theirs:
// the first's cells are all used within hours, and the second's tell readers whether a seal is
// current.
var sealedTables = []*Table{IgnoredKeyPaths, GateReasonCalls}

// mutationPoll is how often SealClosedHours asks whether its deletes are done.
const mutationPoll = 100 * time.Millisecond

// SealResult is what one SealClosedHours did.
type SealResult struct {
	// Through is the first hour not sealed (UTC): the start of the hour before now's.
	Through time.Time
	// Hours are the hours sealed, oldest first (empty when every closed hour was current).
	Hours []time.Time
}

// SealClosedHours seals the closed hours that need it (migration 0037): every hour before the
// start of the hour before now's (an hour gets an hour after its end for in-flight events) in
// which the rollups count tool calls and that has no seal, or whose rollup rows of tool calls
// (events_by_name_hourly's) changed since its seal. For each such hour, SealHoursPerInsert
// hours at a time, it counts the hour's deduplicated raw tool calls, then recomputes from the
// raw rows its ignored key paths (ignored_key_paths_sealed) and its gate-reason cells' calls
// and distinct people (gate_reason_people_sealed), stamped sealed_at = now, then records the
// hours (rollup_sealed_hours). Last it deletes the per-partition rows of
// ignored_key_paths_hourly and gate_reason_calls_hourly of every sealed hour that has some
// (also those an earlier run that failed after recording its hours left), and returns once
// ClickHouse has applied the deletes. On the sharded layout (Distributed tables over
// mcpulse_local) the deletes run ON CLUSTER on the local tables, found at run time
// (migrations.MutationTarget), and are waited for on one replica of every shard.
//
// Readers take a sealed hour's cells from the sealed tables only while the seal's count of tool
// calls equals the rollups' (events_by_name_hourly) and no batch has written the hour's rows
// there since the seal began (a replay may store a call again derived otherwise, the count
// unchanged), and from the raw rows otherwise, so a seal is never wrong, only late: a run is
// idempotent, and an event arriving in a sealed hour sends that hour to the raw rows until the
// next run. Errors are ClickHouse's, wrapped; the hours recorded before an error stay sealed,
// and a run after it seals the rest.
func SealClosedHours(ctx context.Context, conn driver.Conn, now time.Time) (SealResult, error) {
	now = now.UTC().Truncate(time.Second)
	res := SealResult{Through: now.Truncate(time.Hour).Add(-time.Hour)}
	hours, counted, err := hoursToSeal(ctx, conn, res.Through)
	if err != nil {
		return res, err
	}
	for i := 0; i < len(hours); i += SealHoursPerInsert {
		part := hours[i:min(i+SealHoursPerInsert, len(hours))]
		if err := sealHours(ctx, conn, now, part, counted[i:i+len(part)]); err != nil {
			return res, err
		}
		res.Hours = append(res.Hours, part...)
	}
	return res, deleteSealedRows(ctx, conn)
}

// rollupCount is what the rollups count in an hour when a seal begins: its tool calls
// (events_by_name_hourly's $mcp_tool_call events, summed over partitions) and the sum of those
// rows' versions, which any batch writing them changes.
type rollupCount struct {
	calls, versions uint64
}

// hoursToSeal lists the closed hours before through that need a seal, oldest first, with what
// the rollups count in each now.
func hoursToSeal(ctx context.Context, conn driver.Conn, through time.Time) ([]time.Time, []rollupCount, error) {
	rows, err := conn.Query(ctx, mcsql.Rollup("hours_to_seal"), through.Unix())
	if err != nil {
		return nil, nil, fmt.Errorf("seal: list the hours to seal: %w", err)
	}
	defer rows.Close()
	var hours []time.Time
	var counted []rollupCount
	for rows.Next() {
		var h time.Time
		var c rollupCount
		if err := rows.Scan(&h, &c.calls, &c.versions); err != nil {
			return nil, nil, fmt.Errorf("seal: list the hours to seal: %w", err)
		}
		hours = append(hours, h.UTC())
		counted = append(counted, c)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("seal: list the hours to seal: %w", err)
	}
	return hours, counted, nil
}

// sealHours seals hours (at most SealHoursPerInsert, oldest first); counted[i] is what the
// rollups counted in hours[i] when the seal began.
func sealHours(ctx context.Context, conn driver.Conn, now time.Time, hours []time.Time, counted []rollupCount) error {
	first, last := hours[0], hours[len(hours)-1]
	span := fmt.Sprintf("%s to %s", first.Format(time.RFC3339), last.Format(time.RFC3339))
	unix := make([]uint32, len(hours))
	for j, h := range hours {
		unix[j] = uint32(h.Unix())
	}
	// The raw count comes first: the cells recomputed after it count at least those calls, so
	// a seal whose count matches the rollups' never lacks a call they count.
	toolCalls := make(map[int64]uint64, len(hours))
	rows, err := conn.Query(ctx, mcsql.Rollup("seal_tool_calls"), first.Unix(), last.Unix(), unix)
	if err != nil {
		return fmt.Errorf("seal %s: count the raw tool calls: %w", span, err)
	}
	for rows.Next() {
		var h time.Time
		var n uint64
		if err := rows.Scan(&h, &n); err != nil {
			rows.Close()
			return fmt.Errorf("seal %s: count the raw tool calls: %w", span, err)
		}
		toolCalls[h.Unix()] = n
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("seal %s: count the raw tool calls: %w", span, err)
	}
	for _, stmt := range []string{"seal_gate_reason_people", "seal_ignored_key_paths"} {
		if err := conn.Exec(ctx, mcsql.Rollup(stmt), now.Unix(), first.Unix(), last.Unix(), unix); err != nil {
			return fmt.Errorf("seal %s: %s: %w", span, strings.TrimPrefix(stmt, "seal_"), err)
		}
	}
	batch, err := conn.PrepareBatch(ctx, mcsql.Rollup("seal_hours"))
	if err != nil {
		return fmt.Errorf("seal %s: record the hours: %w", span, err)
	}
	for j, h := range hours {
		if err := batch.Append(h, toolCalls[h.Unix()], counted[j].calls, counted[j].versions, now); err != nil {
			_ = batch.Abort()
			return fmt.Errorf("seal %s: record the hours: %w", span, err)
		}
	}
	if err := batch.Send(); err != nil {
		return fmt.Errorf("seal %s: record the hours: %w", span, err)
	}
	return nil
}

// deleteSealedRows deletes the per-partition rows of every sealed hour that still has some in
// each of sealedTables (one delete per table), then waits until ClickHouse has applied them.
// Each delete runs where the table's mutations run (migrations.MutationTarget): the table
// itself, or on the sharded layout its local table ON CLUSTER.
func deleteSealedRows(ctx context.Context, conn driver.Conn) error {
	var pending []migrations.Target
	for _, t := range sealedTables {
		rows, err := conn.Query(ctx, strings.ReplaceAll(mcsql.Rollup("sealed_hours_with_rows"), "{table}", t.Name))
		if err != nil {
			return fmt.Errorf("seal: list the sealed hours with rows in %s: %w", t.Name, err)
		}
		var hours []uint32
		for rows.Next() {
			var h uint32
			if err := rows.Scan(&h); err != nil {
				rows.Close()
				return fmt.Errorf("seal: list the sealed hours with rows in %s: %w", t.Name, err)
			}
			hours = append(hours, h)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("seal: list the sealed hours with rows in %s: %w", t.Name, err)
		}
		if len(hours) == 0 {
			continue
		}
		target, err := migrations.MutationTarget(ctx, conn, strings.TrimPrefix(t.Name, migrations.Database+"."))
		if err != nil {
			return fmt.Errorf("seal: %w", err)
		}
		if err := conn.Exec(ctx, strings.ReplaceAll(mcsql.Rollup("seal_delete_cells"), "{table}", target.Name()), hours); err != nil {
			return fmt.Errorf("seal: delete the per-partition rows of %d sealed hours of %s: %w", len(hours), t.Name, err)
		}
		pending = append(pending, target)
	}
	if len(pending) == 0 {
		return nil
	}
	return awaitDeletes(ctx, conn, pending)
}

// awaitDeletes waits until ClickHouse has applied every delete of the targets (a mutation
// runs in the background; on the sharded layout, on one replica of every shard), polling
// every mutationPoll; it fails when ctx ends first. The targets share one layout.
func awaitDeletes(ctx context.Context, conn driver.Conn, targets []migrations.Target) error {
	names := make([]string, len(targets))
	for i, t := range targets {
		names[i] = t.Table
	}
	q := strings.ReplaceAll(mcsql.Rollup("seal_mutations_pending"), "{mutations}", targets[0].System("mutations"))
	tick := time.NewTicker(mutationPoll)
	defer tick.Stop()
	for {
		var pending uint64
		if err := conn.QueryRow(ctx, q, targets[0].Database, names).Scan(&pending); err != nil {
			return fmt.Errorf("seal: wait for the deletes of %s: %w", strings.Join(names, ", "), err)
		}
		if pending == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("seal: %d deletes of %s not applied yet: %w", pending, strings.Join(names, ", "), ctx.Err())
		case <-tick.C:
		}
	}
}
