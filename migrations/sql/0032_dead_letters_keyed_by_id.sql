-- dead_letters collapses re-recorded dead letters by dead_letter_id (ReplacingMergeTree), but
-- migration 0001 partitioned it by toYYYYMM(received_at), a column outside its sort key:
-- ClickHouse replaces rows only within one partition, so a dead letter recorded again in a later
-- month (the consumer re-dead-letters a replayed batch; the DLQ message gets a new time) stayed
-- twice, and a FINAL query filtered on a time range could return the superseded version. The
-- table is rebuilt without a partition key (dead letters are few), with a typed reason class
-- beside the one-line reason (ingest.DeadLetterClass,
-- Kafka header mcpulse-error-class; '' for rows recorded before the class existed).

CREATE TABLE IF NOT EXISTS mcpulse.dead_letters_keyed
(
    dead_letter_id String,
    received_at DateTime('UTC'),
    source_topic String,
    reason String,
    event_uuid String,
    event String,
    distinct_id String,
    payload String,
    dlq_partition Int32,
    dlq_offset Int64,
    reason_class String
)
ENGINE = ReplacingMergeTree()
ORDER BY (dead_letter_id);

INSERT INTO mcpulse.dead_letters_keyed (dead_letter_id, received_at, source_topic, reason, event_uuid, event,
    distinct_id, payload, dlq_partition, dlq_offset, reason_class)
SELECT dead_letter_id, received_at, source_topic, reason, event_uuid, event, distinct_id, payload,
    dlq_partition, dlq_offset, ''
FROM mcpulse.dead_letters FINAL;

RENAME TABLE mcpulse.dead_letters TO mcpulse.dead_letters_by_month, mcpulse.dead_letters_keyed TO mcpulse.dead_letters;

DROP TABLE IF EXISTS mcpulse.dead_letters_by_month;
