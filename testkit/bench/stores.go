package bench

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/redis/go-redis/v9"

	"github.com/mcpulse/mcpulse/migrations"
)

// RedisGrowth is what mcpulse's phase left in Redis, which started the run empty.
type RedisGrowth struct {
	// UsedMemoryDelta is INFO memory's used_memory after minus before the phase, in bytes.
	UsedMemoryDelta int64 `json:"used_memory_delta_bytes"`
	// BytesPerMillion is UsedMemoryDelta scaled to a million tool calls.
	BytesPerMillion float64 `json:"bytes_per_million_events"`
	// Keys is DBSIZE after the phase: suppression and recruitment records (tool calls leave
	// none; their dedup state is per partition, in the consumer).
	Keys int64 `json:"keys"`
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
	g.UsedMemoryDelta = after - before
	g.BytesPerMillion = float64(g.UsedMemoryDelta) / float64(events) * 1e6
	if g.Keys, err = rdb.DBSize(ctx).Result(); err != nil {
		return fmt.Errorf("redis DBSIZE: %w", err)
	}
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
