-- Cardinality caps (DESIGN.md §8, "Cardinality caps"): per Kafka partition, MCP server name and
-- hour of `timestamp`, the consumer admits at most so many distinct tool names, client names and
-- counted ignored-key paths; a tool call's value past a cap is stored folded into a named
-- overflow bucket ('(other tools)', '(other clients)', '(other keys)') in tool_name, client_name
-- and counted_ignored_keys, so the rollups, the seal and the raw-row queries all see the bucket.
-- The value it replaced is kept in the folded_* column of its row ('' / [] when nothing was
-- folded), which is also what the consumer reads back to recover the values it admitted.
ALTER TABLE mcpulse.tool_calls ADD COLUMN folded_tool_name String;
ALTER TABLE mcpulse.tool_calls ADD COLUMN folded_client_name String;
ALTER TABLE mcpulse.tool_calls ADD COLUMN folded_key_paths Array(String);

-- Per hour, server and dimension ('tool', 'client', 'key_path'): how many distinct values were
-- folded and by how many calls. Filled by the materialized views below from the raw inserts as
-- uniq states, so a replayed or re-sent block changes nothing; readers merge the states
-- (sql/queries/panel_cardinality_overflow.sql).
CREATE TABLE IF NOT EXISTS mcpulse.cardinality_overflow_hourly
(
    hour DateTime('UTC'),
    server_name String,
    dimension String,
    folded_values AggregateFunction(uniq, String),
    folded_calls AggregateFunction(uniq, String)
)
ENGINE = AggregatingMergeTree()
PARTITION BY toYYYYMM(hour)
ORDER BY (hour, server_name, dimension);

CREATE MATERIALIZED VIEW IF NOT EXISTS mcpulse.cardinality_overflow_tools_mv
TO mcpulse.cardinality_overflow_hourly
AS SELECT
    toStartOfHour(timestamp) AS hour,
    server_name,
    'tool' AS dimension,
    uniqState(folded_tool_name) AS folded_values,
    uniqState(toString(uuid)) AS folded_calls
FROM mcpulse.tool_calls
WHERE folded_tool_name != ''
GROUP BY hour, server_name;

CREATE MATERIALIZED VIEW IF NOT EXISTS mcpulse.cardinality_overflow_clients_mv
TO mcpulse.cardinality_overflow_hourly
AS SELECT
    toStartOfHour(timestamp) AS hour,
    server_name,
    'client' AS dimension,
    uniqState(folded_client_name) AS folded_values,
    uniqState(toString(uuid)) AS folded_calls
FROM mcpulse.tool_calls
WHERE folded_client_name != ''
GROUP BY hour, server_name;

CREATE MATERIALIZED VIEW IF NOT EXISTS mcpulse.cardinality_overflow_key_paths_mv
TO mcpulse.cardinality_overflow_hourly
AS SELECT
    toStartOfHour(timestamp) AS hour,
    server_name,
    'key_path' AS dimension,
    uniqState(key_path) AS folded_values,
    uniqState(toString(uuid)) AS folded_calls
FROM mcpulse.tool_calls
ARRAY JOIN folded_key_paths AS key_path
WHERE notEmpty(folded_key_paths)
GROUP BY hour, server_name;
