-- Raw event tables (DESIGN.md §4). One row per event; ReplacingMergeTree on the event key
-- collapses a re-inserted event (a consumer replay after a crash) at merge time, and every
-- reader counts with FINAL or uniqExact(uuid), so a replay never double-counts.
-- Times are DateTime('UTC') so hour and day buckets are UTC whatever the server's time zone.

CREATE TABLE IF NOT EXISTS mcpulse.tool_calls
(
    uuid UUID,
    timestamp DateTime('UTC'),
    distinct_id String,
    tool_name String,
    raw_tool_name String,
    exec_verb String,
    exec_target_tool String,
    client_name String,
    client_version String,
    mode String,
    conversation_id String,
    session_id String,
    source String,
    is_error UInt8,
    error_type String,
    duration_ms Nullable(Float64),
    ignored_keys Array(String),
    ignored_keys_total UInt32,
    counted_ignored_keys Array(String),
    recruitment_reason String,
    url_supported Nullable(UInt8),
    form_supported Nullable(UInt8),
    campaign_id String,
    completed_calls Nullable(Int64),
    session_age_seconds Nullable(Float64),
    properties String,
    kafka_partition Int32,
    kafka_offset Int64,
    inserted_at DateTime('UTC')
)
ENGINE = ReplacingMergeTree()
PARTITION BY toYYYYMM(timestamp)
ORDER BY (tool_name, timestamp, uuid);

CREATE TABLE IF NOT EXISTS mcpulse.recruitment_events
(
    uuid UUID,
    timestamp DateTime('UTC'),
    kind String,
    distinct_id String,
    identity_hash String,
    instance_url String,
    campaign_id String,
    invitation_id String,
    feature_flag String,
    response String,
    responded_at Nullable(DateTime('UTC')),
    invitation_sent_at Nullable(DateTime('UTC')),
    recruitment_reason String,
    url_supported Nullable(UInt8),
    form_supported Nullable(UInt8),
    completed_calls Nullable(Int64),
    session_age_seconds Nullable(Float64),
    properties String,
    kafka_partition Int32,
    kafka_offset Int64,
    inserted_at DateTime('UTC')
)
ENGINE = ReplacingMergeTree()
PARTITION BY toYYYYMM(timestamp)
ORDER BY (campaign_id, timestamp, uuid);

-- One row per dead letter; dead_letter_id is deterministic (source topic/partition/offset, or
-- the publishing file and line), so a re-recorded dead letter collapses.
CREATE TABLE IF NOT EXISTS mcpulse.dead_letters
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
    dlq_offset Int64
)
ENGINE = ReplacingMergeTree()
PARTITION BY toYYYYMM(received_at)
ORDER BY (dead_letter_id);
