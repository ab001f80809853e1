package migrations

import (
	"context"
	"fmt"
	"log/slog"
	"slices"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// RawTables are the tables of raw events the consumer inserts a batch's rows into, each
// partitioned by month and Kafka partition (migrations 0044 and 0045), so that a replayed
// batch's part of one Kafka partition is the part stored the first time (DESIGN.md §5,
// "Replays dedup at insert"). No materialized view reads them: the views read ViewFeeds.
var RawTables = []string{
	"tool_calls", "recruitment_events", "mcp_initialize_events", "mcp_exceptions", "other_events",
	"mcp_feedback", "mcp_resource_prompt_events", "mcp_identify_events", "tools_list_events",
}

// ViewFeeds maps each raw table whose rows materialized views need (in Database, without it)
// to the Null table with its columns the views read instead (migration 0045): the consumer
// inserts the rows the views need into the feed before it inserts the batch into the raw
// table, so a raw part never commits unless its views were fed, and a replay the server drops
// from the raw table still feeds them (the feed drops nothing; the views count distinct ids).
var ViewFeeds = map[string]string{
	"tool_calls":         "tool_calls_feed",
	"recruitment_events": "recruitment_events_feed",
}

// ByKafkaPartition reports whether raw table name (in Database, without it) is partitioned by
// month and Kafka partition (migrations 0044 and 0045: every one of RawTables) rather than by
// month only.
func ByKafkaPartition(name string) bool { return slices.Contains(RawTables, name) }

// InsertDedupWindow is how many of a raw table's most recent inserted parts a server remembers
// to drop a part inserted again: replicated_deduplication_window on a cluster (set by migration
// 0044) and non_replicated_deduplication_window on a single server of a release that has it
// (ClickHouse 20.10 and later; EnableInsertDedup).
const InsertDedupWindow = 1000

// dedupSettingQuery tells whether the server knows the non-replicated window: ClickHouse
// 18.16 does not, and refuses a table setting it does not know.
const dedupSettingQuery = "SELECT count() FROM system.merge_tree_settings WHERE name = 'non_replicated_deduplication_window'"

// EnableInsertDedup sets non_replicated_deduplication_window = InsertDedupWindow on every raw
// table of a single server whose release knows the setting, so that a batch inserted again is
// dropped there as on a replicated table; it reports whether it did. On ClickHouse 18.16 it
// changes nothing (false, nil): a non-replicated table there keeps a replayed part until a
// merge collapses it, and readers count it once with FINAL. Replicated tables are left alone:
// they deduplicate by their own window. Errors name the table.
func EnableInsertDedup(ctx context.Context, conn driver.Conn) (bool, error) {
	var known uint64
	if err := conn.QueryRow(ctx, dedupSettingQuery).Scan(&known); err != nil {
		return false, fmt.Errorf("look up non_replicated_deduplication_window: %w", err)
	}
	if known == 0 {
		return false, nil
	}
	set := false
	for _, t := range RawTables {
		var engine string
		if err := conn.QueryRow(ctx, "SELECT engine FROM system.tables WHERE database = ? AND name = ?", Database, t).Scan(&engine); err != nil {
			return set, fmt.Errorf("engine of %s.%s: %w", Database, t, err)
		}
		if engine != "ReplacingMergeTree" {
			continue // Replicated (its own window), or Distributed (the local tables are replicated)
		}
		q := fmt.Sprintf("ALTER TABLE %s.%s MODIFY SETTING non_replicated_deduplication_window = %d", Database, t, InsertDedupWindow)
		if err := conn.Exec(ctx, q); err != nil {
			return set, fmt.Errorf("insert dedup on %s.%s: %w", Database, t, err)
		}
		set = true
	}
	return set, nil
}

// enableInsertDedup is UpWith's last step on a single server, once the raw tables exist.
func enableInsertDedup(ctx context.Context, conn driver.Conn, log *slog.Logger) error {
	on, err := EnableInsertDedup(ctx, conn)
	if err != nil {
		return err
	}
	if on {
		log.Debug("raw tables drop a replayed insert", "non_replicated_deduplication_window", InsertDedupWindow)
	}
	return nil
}
