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

// insertRows sends rows in one batch. Every row was built by this package with the column
// types of its table, so a failed Append is a BUG, not bad input.
func insertRows(ctx context.Context, conn driver.Conn, query string, rows []row) error {
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
