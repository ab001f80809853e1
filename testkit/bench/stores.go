package bench

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/redis/go-redis/v9"

	"github.com/mcpulse/mcpulse/consumers"
	"github.com/mcpulse/mcpulse/migrations"
)

// RedisGrowth is what mcpulse's phase left in Redis, which started the run empty.
type RedisGrowth struct {
	// UsedMemoryDelta is INFO memory's used_memory after minus before the phase, in bytes.
	UsedMemoryDelta int64 `json:"used_memory_delta_bytes"`
	// BytesPerMillion is UsedMemoryDelta scaled to a million tool calls.
	BytesPerMillion float64 `json:"bytes_per_million_events"`
	// Keys is DBSIZE after the phase: suppression and recruitment records (tool calls leave
	// none; their dedup state is per partition, in the consumer), less the consumer group's
	// record of its batches' offset ranges.
	Keys int64 `json:"keys"`
	// BatchRangeBytes is what that record takes (MEMORY USAGE of the keys under
	// consumers.BatchRangesKeyPrefix): a hash of a field or two per member, whatever the
	// events, so it is left out of UsedMemoryDelta.
	BatchRangeBytes int64 `json:"batch_range_bytes"`
}

// usedMemory reads INFO memory's used_memory.
func usedMemory(ctx context.Context, rdb redis.UniversalClient) (int64, error) {
	info, err := rdb.Info(ctx, "memory").Result()
	if err != nil {
		return 0, fmt.Errorf("redis INFO memory: %w", err)
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, fmt.Errorf("redis INFO memory has no used_memory")
}

// redisGrowth measures Redis after mcpulse's phase against used_memory before it.
func redisGrowth(ctx context.Context, rdb redis.UniversalClient, before int64, events int, g *RedisGrowth) error {
	after, err := usedMemory(ctx, rdb)
	if err != nil {
		return err
	}
	if g.Keys, err = rdb.DBSize(ctx).Result(); err != nil {
		return fmt.Errorf("redis DBSIZE: %w", err)
	}
	ranges, err := rdb.Keys(ctx, consumers.BatchRangesKeyPrefix+"*").Result()
	if err != nil {
		return fmt.Errorf("redis KEYS %s*: %w", consumers.BatchRangesKeyPrefix, err)
	}
	for _, k := range ranges {
		n, err := rdb.MemoryUsage(ctx, k).Result()
		if err != nil {
			return fmt.Errorf("redis MEMORY USAGE %s: %w", k, err)
		}
		g.BatchRangeBytes += n
	}
	g.Keys -= int64(len(ranges))
	g.UsedMemoryDelta = after - before - g.BatchRangeBytes
	g.BytesPerMillion = float64(g.UsedMemoryDelta) / float64(events) * 1e6
	return nil
}

// RollupStorage is one rollup table's storage: its active parts in system.parts as mcpulse's
// phase left them, and after OPTIMIZE TABLE ... FINAL merged them (the steady state).
type RollupStorage struct {
	Table          string `json:"table"`
	Rows           uint64 `json:"rows"`
	Bytes          uint64 `json:"bytes_on_disk"`
	Parts          uint64 `json:"parts"`
	RowsOptimized  uint64 `json:"rows_optimized"`
	BytesOptimized uint64 `json:"bytes_on_disk_optimized"`
}

// rollupTables lists mcpulse's rollup tables: the MergeTree-family tables of its database
// named like a rollup (*_hourly*, *_daily*, *_sealed), so a rollup added by a migration is measured
// without a change here, and the rollup writer's bookkeeping (rollup_*: write markers, epochs).
func rollupTables(ctx context.Context, ch driver.Conn) ([]string, error) {
	rows, err := ch.Query(ctx, `SELECT name FROM system.tables
WHERE database = ? AND engine LIKE '%MergeTree' AND match(name, '_(hourly|daily)|_sealed$|^rollup_')
ORDER BY name`, migrations.Database)
	if err != nil {
		return nil, fmt.Errorf("list rollup tables: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, err
		}
		out = append(out, name)
	}
	return out, rows.Err()
}

// tableStorage measures the active parts of mcpulse's table as they are (no OPTIMIZE).
func tableStorage(ctx context.Context, ch driver.Conn, table string) (RollupStorage, error) {
	s := RollupStorage{Table: table}
	err := ch.QueryRow(ctx, `SELECT sum(rows), sum(bytes_on_disk), count() FROM system.parts
WHERE active AND database = ? AND table = ?`, migrations.Database, table).Scan(&s.Rows, &s.Bytes, &s.Parts)
	if err != nil {
		return s, fmt.Errorf("parts of %s: %w", table, err)
	}
	return s, nil
}

// rollupStorage measures every rollup table's active parts, then merges each with OPTIMIZE
// FINAL and measures again.
func rollupStorage(ctx context.Context, ch driver.Conn) ([]RollupStorage, error) {
	tables, err := rollupTables(ctx, ch)
	if err != nil {
		return nil, err
	}
	parts := func(table string) (rows, bytes, n uint64, err error) {
		s, err := tableStorage(ctx, ch, table)
		return s.Rows, s.Bytes, s.Parts, err
	}
	out := make([]RollupStorage, 0, len(tables))
	for _, t := range tables {
		s := RollupStorage{Table: t}
		if s.Rows, s.Bytes, s.Parts, err = parts(t); err != nil {
			return nil, fmt.Errorf("parts of %s: %w", t, err)
		}
		if err := ch.Exec(ctx, "OPTIMIZE TABLE "+migrations.Database+"."+t+" FINAL"); err != nil {
			return nil, fmt.Errorf("optimize %s: %w", t, err)
		}
		if s.RowsOptimized, s.BytesOptimized, _, err = parts(t); err != nil {
			return nil, fmt.Errorf("parts of %s: %w", t, err)
		}
		out = append(out, s)
	}
	return out, nil
}

// rawTables are the raw event tables a corpus fills (tool calls; for the SDK shape the
// handshakes, exceptions and served schemas around them), measured after mcpulse's phase.
var rawTables = []string{"tool_calls", "mcp_initialize_events", "mcp_exceptions", "served_tool_schemas", "other_events"}

// rawStorage measures the raw tables that hold rows (active parts as left, no OPTIMIZE).
func rawStorage(ctx context.Context, ch driver.Conn) ([]RollupStorage, error) {
	var out []RollupStorage
	for _, t := range rawTables {
		s, err := tableStorage(ctx, ch, t)
		if err != nil {
			return nil, err
		}
		if s.Rows > 0 {
			out = append(out, s)
		}
	}
	return out, nil
}

// ColumnBytes is one column's share of a table's storage (system.columns).
type ColumnBytes struct {
	Column string `json:"column"`
	// Compressed and Uncompressed are the column's bytes in the table's parts;
	// CompressedPerRow and UncompressedPerRow are them ÷ the table's rows.
	Compressed         uint64  `json:"compressed_bytes"`
	Uncompressed       uint64  `json:"uncompressed_bytes"`
	CompressedPerRow   float64 `json:"compressed_bytes_per_row"`
	UncompressedPerRow float64 `json:"uncompressed_bytes_per_row"`
}

// topColumns is how many of tool_calls' columns a run reports, the largest first.
const topColumns = 6

// largestColumns returns table's topColumns largest columns by compressed bytes; rows is the
// table's row count (0: none reported).
func largestColumns(ctx context.Context, ch driver.Conn, table string, rows uint64) ([]ColumnBytes, error) {
	if rows == 0 {
		return nil, nil
	}
	q, err := ch.Query(ctx, `SELECT name, data_compressed_bytes, data_uncompressed_bytes FROM system.columns
WHERE database = ? AND table = ? ORDER BY data_compressed_bytes DESC, name LIMIT `+strconv.Itoa(topColumns), migrations.Database, table)
	if err != nil {
		return nil, fmt.Errorf("columns of %s: %w", table, err)
	}
	defer q.Close()
	var out []ColumnBytes
	for q.Next() {
		var c ColumnBytes
		if err := q.Scan(&c.Column, &c.Compressed, &c.Uncompressed); err != nil {
			return nil, fmt.Errorf("columns of %s: %w", table, err)
		}
		c.CompressedPerRow = float64(c.Compressed) / float64(rows)
		c.UncompressedPerRow = float64(c.Uncompressed) / float64(rows)
		out = append(out, c)
	}
	return out, q.Err()
}
