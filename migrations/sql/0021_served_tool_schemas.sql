-- Tool input schemas as MCP servers serve them, from the $mcp_tools_list events the PostHog MCP
-- analytics SDK sends: one row per (server name, server version, tool, schema content hash), with
-- the first and last time that exact schema was seen. The schema ratchet checks these snapshots
-- without reaching the server; the consumer derives ignored keys against them.
--
-- The consumer inserts one row per listed tool into served_tool_schemas_in (a Null table: it keeps
-- nothing), and the materialized view folds each block into served_tool_schemas as min/max/any
-- states. Folding is idempotent: a replayed or re-sent event gives the same states, so first_seen,
-- last_seen and the row set do not move, whatever order events arrive in. Readers merge the
-- states (v_served_tool_schemas, sql/queries/served_tool_schemas_*), never counting a row twice
-- before the background merge.
CREATE TABLE IF NOT EXISTS mcpulse.served_tool_schemas_in
(
    server_name String,
    server_version String,
    tool_name String,
    -- lowercase hex SHA-256 of input_schema, the inputSchema JSON text exactly as received
    schema_sha256 String,
    input_schema String,
    description String,
    -- 1 when the SDK cut or redacted the schema (misuse.SchemaTruncated): its size is a lower bound
    truncated UInt8,
    seen_at DateTime('UTC'),
    event_uuid UUID
)
ENGINE = Null;

CREATE TABLE IF NOT EXISTS mcpulse.served_tool_schemas
(
    server_name String,
    server_version String,
    tool_name String,
    schema_sha256 String,
    input_schema AggregateFunction(any, String),
    -- the description served with this schema most recently (a description can change while the
    -- schema does not)
    description AggregateFunction(argMax, String, DateTime('UTC')),
    truncated AggregateFunction(max, UInt8),
    first_seen AggregateFunction(min, DateTime('UTC')),
    last_seen AggregateFunction(max, DateTime('UTC'))
)
ENGINE = AggregatingMergeTree()
ORDER BY (server_name, server_version, tool_name, schema_sha256);

CREATE MATERIALIZED VIEW IF NOT EXISTS mcpulse.served_tool_schemas_mv
TO mcpulse.served_tool_schemas
AS SELECT
    server_name,
    server_version,
    tool_name,
    schema_sha256,
    anyState(input_schema) AS input_schema,
    argMaxState(description, seen_at) AS description,
    maxState(truncated) AS truncated,
    minState(seen_at) AS first_seen,
    maxState(seen_at) AS last_seen
FROM mcpulse.served_tool_schemas_in
GROUP BY server_name, server_version, tool_name, schema_sha256;

-- One row per distinct served schema, states merged.
CREATE VIEW IF NOT EXISTS mcpulse.v_served_tool_schemas
AS SELECT
    server_name,
    server_version,
    tool_name,
    schema_sha256,
    anyMerge(input_schema) AS input_schema,
    argMaxMerge(description) AS description,
    maxMerge(truncated) AS truncated,
    minMerge(first_seen) AS first_seen,
    maxMerge(last_seen) AS last_seen
FROM mcpulse.served_tool_schemas
GROUP BY server_name, server_version, tool_name, schema_sha256;
