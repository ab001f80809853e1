package consumers

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// Column lists of the batch inserts. ClickHouse 18.16 refuses a batch without one ("expected 0
// arguments"), and an explicit list keeps a later migration's new column from shifting values.
const (
	insertToolCalls = `INSERT INTO mcpulse.tool_calls (uuid, timestamp, distinct_id, tool_name, raw_tool_name,
exec_verb, exec_target_tool, client_name, client_version, mode, conversation_id, session_id, source,
is_error, error_type, duration_ms, ignored_keys, ignored_keys_total, counted_ignored_keys,
recruitment_reason, url_supported, form_supported, campaign_id, completed_calls, session_age_seconds,
properties, kafka_partition, kafka_offset, inserted_at)`
	insertRecruitment = `INSERT INTO mcpulse.recruitment_events (uuid, timestamp, kind, distinct_id,
identity_hash, instance_url, campaign_id, invitation_id, feature_flag, response, responded_at,
invitation_sent_at, recruitment_reason, url_supported, form_supported, completed_calls,
session_age_seconds, properties, kafka_partition, kafka_offset, inserted_at, timestamp_ms, responded_at_ms)`
	insertAudit = `INSERT INTO mcpulse.suppression_audit (audit_id, at, action, identity_hash, distinct_id,
instance_url, actor, reason, deleted_keys, previous_record, kafka_partition, kafka_offset, at_ms)`
	insertDeadLetters = `INSERT INTO mcpulse.dead_letters (dead_letter_id, received_at, source_topic,
reason, event_uuid, event, distinct_id, payload, dlq_partition, dlq_offset)`
)

// row is one validated set of column values, kept so a failed batch can be rebuilt: a
// clickhouse-go batch cannot be re-sent after a failed Send (DESIGN.md §5).
type row []any

// MaxPartitionsPerInsert is how many monthly partitions one INSERT may touch: current
// ClickHouse refuses an INSERT block that falls in more than max_partitions_per_insert_block
// partitions (100 by default; code 252, TOO_MANY_PARTS), and every raw table and rollup is
// partitioned by UTC month (toYYYYMM). ClickHouse 18.16 has no such limit.
const MaxPartitionsPerInsert = 100

// insertRows sends rows in as few batches as keep each within MaxPartitionsPerInsert months
// (one batch unless the rows span more: a backfill, or clocks set years apart). Every row was
// built by this package with the column types of its table, so a failed Append is a BUG, not
// bad input. A retry after a later batch failed re-sends the earlier ones, which the
// replacing raw tables and the uniqExact rollups absorb (DESIGN.md §5).
func insertRows(ctx context.Context, conn driver.Conn, query string, rows []row) error {
	for _, chunk := range byMonths(rows, MaxPartitionsPerInsert) {
		if err := insertBatch(ctx, conn, query, chunk); err != nil {
			return err
		}
	}
	return nil
}

func insertBatch(ctx context.Context, conn driver.Conn, query string, rows []row) error {
	if len(rows) == 0 {
		return nil
	}
	batch, err := conn.PrepareBatch(ctx, query)
	if err != nil {
		return err
	}
	for _, r := range rows {
		if err := batch.Append(r...); err != nil {
			_ = batch.Abort()
			return fmt.Errorf("BUG: append to %s: %w", tableOf(query), err)
		}
	}
	return batch.Send()
}

// byMonths cuts rows, in order, into runs whose time values fall in at most max UTC months.
// Every time.Time and *time.Time column counts, not only the table's partition key, so a
// rollup a materialized view partitions by another of the row's times (the funnel by
// invitation_sent_at) stays within the limit too.
func byMonths(rows []row, max int) [][]row {
	var (
		out    [][]row
		start  int
		months = map[int]bool{}
	)
	for i, r := range rows {
		var own []int
		for _, v := range r {
			var t time.Time
			switch x := v.(type) {
			case time.Time:
				t = x
			case *time.Time:
				if x == nil {
					continue
				}
				t = *x
			default:
				continue
			}
			u := t.UTC()
			own = append(own, u.Year()*12+int(u.Month()))
		}
		added := 0
		for _, m := range own {
			if !months[m] {
				added++
			}
		}
		if len(months)+added > max && i > start {
			out = append(out, rows[start:i])
			start = i
			clear(months)
		}
		for _, m := range own {
			months[m] = true
		}
	}
	if start < len(rows) {
		out = append(out, rows[start:])
	}
	return out
}

func tableOf(query string) string {
	f := strings.Fields(query)
	if len(f) > 2 {
		return f[2]
	}
	return query
}

// lookupInvitationSentAt returns the send time of each invitation id already stored in
// ClickHouse (ids without a stored invitation are absent from the map).
func lookupInvitationSentAt(ctx context.Context, conn driver.Conn, ids []string) (map[string]time.Time, error) {
	out := make(map[string]time.Time, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := conn.Query(ctx, `SELECT invitation_id, min(timestamp) FROM mcpulse.recruitment_events
WHERE kind = 'invitation_sent' AND has(?, invitation_id) GROUP BY invitation_id`, ids)
	if err != nil {
		return nil, fmt.Errorf("look up invitations: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			id string
			at time.Time
		)
		if err := rows.Scan(&id, &at); err != nil {
			return nil, err
		}
		out[id] = at.UTC()
	}
	return out, rows.Err()
}

func boolFlag(b *bool) *uint8 {
	if b == nil {
		return nil
	}
	var v uint8
	if *b {
		v = 1
	}
	return &v
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
