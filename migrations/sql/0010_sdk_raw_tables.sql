-- Raw tables of the MCP analytics SDK's other events (DESIGN.md §2, §4), one row per event,
-- collapsing a re-inserted event like tool_calls (ReplacingMergeTree; partitioned by the month of
-- a column of the sort key, so a re-inserted row always meets its twin). `properties` holds the
-- properties no column holds.

-- $mcp_initialize: an MCP session's handshake (client, protocol versions, capabilities).
CREATE TABLE IF NOT EXISTS mcpulse.mcp_initialize_events
(
    uuid UUID,
    timestamp DateTime('UTC'),
    distinct_id String,
    session_id String,
    client_name String,
    client_version String,
    -- negotiated ($mcp_protocol_version), and the one the client asked for
    protocol_version String,
    requested_protocol_version String,
    -- JSON text of the request's and the result's capabilities objects ('' when absent)
    client_capabilities String,
    server_name String,
    server_version String,
    server_capabilities String,
    properties String,
    kafka_partition Int32,
    kafka_offset Int64,
    inserted_at DateTime('UTC')
)
ENGINE = ReplacingMergeTree()
PARTITION BY toYYYYMM(timestamp)
ORDER BY (server_name, timestamp, uuid);

-- $exception: an exception (the SDK sends one beside each failed tool call), with the class of
-- its message (misuse.ClassifyError: validation_type, validation_required, unknown_tool, ...).
CREATE TABLE IF NOT EXISTS mcpulse.mcp_exceptions
(
    uuid UUID,
    timestamp DateTime('UTC'),
    distinct_id String,
    session_id String,
    tool_name String,
    exception_type String,
    exception_message String,
    exception_level String,
    error_class String,
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
ORDER BY (tool_name, timestamp, uuid);

-- Events of any other name ($identify, $mcp_resource_read, $pageview, ...): counted per name
-- and hour (count() ... FINAL GROUP BY event, toStartOfHour(timestamp)); properties not kept.
CREATE TABLE IF NOT EXISTS mcpulse.other_events
(
    uuid UUID,
    timestamp DateTime('UTC'),
    event String,
    distinct_id String,
    kafka_partition Int32,
    kafka_offset Int64,
    inserted_at DateTime('UTC')
)
ENGINE = ReplacingMergeTree()
PARTITION BY toYYYYMM(timestamp)
ORDER BY (event, timestamp, uuid);
