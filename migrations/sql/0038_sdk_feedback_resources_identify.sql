-- Raw tables of the MCP analytics SDK's remaining events (DESIGN.md §2, §4), which were stored in
-- other_events as a name and a time only. One row per event, collapsing a re-inserted event like
-- the other raw tables (ReplacingMergeTree on the event key; partitioned by the month of
-- `timestamp`, a column of the sort key, so a re-inserted row always meets its twin).
-- `properties` holds the properties no column holds. Free text is the SDK's, already sanitized by
-- it: stored as sent, its redaction markers included.

-- $mcp_feedback (the send_feedback virtual tool) and $mcp_missing_capability (get_more_tools):
-- what agents report. For a missing capability, `intent` is what the agent said was missing.
CREATE TABLE IF NOT EXISTS mcpulse.mcp_feedback
(
    uuid UUID,
    timestamp DateTime('UTC'),
    -- feedback or missing_capability
    kind String,
    distinct_id String,
    session_id String,
    conversation_id String,
    -- the virtual tool called ($mcp_resource_name)
    tool_name String,
    -- missing_capability, issue, praise, other ('' for kind missing_capability)
    feedback_type String,
    summary String,
    details String,
    friction_points String,
    suggested_improvement String,
    sentiment String,
    -- the existing tool the feedback is about ($mcp_feedback_tool)
    feedback_tool String,
    task_completed Nullable(UInt8),
    intent String,
    intent_source String,
    llm_model String,
    is_error UInt8,
    duration_ms Nullable(Float64),
    server_name String,
    server_version String,
    client_name String,
    client_version String,
    protocol_version String,
    properties String,
    kafka_partition Int32,
    kafka_offset Int64,
    inserted_at DateTime('UTC')
)
ENGINE = ReplacingMergeTree()
PARTITION BY toYYYYMM(timestamp)
ORDER BY (kind, timestamp, uuid);

-- $mcp_resources_list, $mcp_resource_read, $mcp_prompts_list, $mcp_prompt_get: one row per
-- request, `name` the uri read or the prompt got ('' for a listing).
CREATE TABLE IF NOT EXISTS mcpulse.mcp_resource_prompt_events
(
    uuid UUID,
    timestamp DateTime('UTC'),
    -- resources_list, resource_read, prompts_list, prompt_get
    kind String,
    distinct_id String,
    session_id String,
    conversation_id String,
    -- the captured request's method (resources/templates/list is a resources_list too)
    method String,
    name String,
    -- entries of a listing's captured result (the SDK keeps at most 100); NULL when not captured
    listed_count Nullable(UInt32),
    is_error UInt8,
    error_type String,
    error_message String,
    duration_ms Nullable(Float64),
    server_name String,
    server_version String,
    client_name String,
    client_version String,
    protocol_version String,
    properties String,
    kafka_partition Int32,
    kafka_offset Int64,
    inserted_at DateTime('UTC')
)
ENGINE = ReplacingMergeTree()
PARTITION BY toYYYYMM(timestamp)
ORDER BY (kind, name, timestamp, uuid);

-- $identify: a person identified, with the person properties to set ($set, $set_once as JSON text).
CREATE TABLE IF NOT EXISTS mcpulse.mcp_identify_events
(
    uuid UUID,
    timestamp DateTime('UTC'),
    distinct_id String,
    session_id String,
    -- what the identifying request named ($mcp_resource_name)
    resource_name String,
    set_properties String,
    set_once_properties String,
    server_name String,
    server_version String,
    client_name String,
    client_version String,
    protocol_version String,
    properties String,
    kafka_partition Int32,
    kafka_offset Int64,
    inserted_at DateTime('UTC')
)
ENGINE = ReplacingMergeTree()
PARTITION BY toYYYYMM(timestamp)
ORDER BY (distinct_id, timestamp, uuid);
