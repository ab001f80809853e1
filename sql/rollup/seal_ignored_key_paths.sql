-- Seals the ignored key paths of the given hours: per hour, tool, MCP server and key path, the
-- successful calls with measurable ignored keys that list the path (once per call), recomputed
-- from the deduplicated raw table and stamped with the seal's time (migration 0037), as
-- ignored_key_paths_hourly counts them.
-- Parameters: sealed_at (DateTime, Unix seconds), first hour, last hour (DateTime, Unix
-- seconds), the hours (Array(UInt32), Unix seconds).
INSERT INTO mcpulse.ignored_key_paths_sealed (hour, tool_name, server_name, server_version, key_path,
    occurrences, sealed_at)
SELECT hour, tool_name, server_name, server_version, key_path, count(), toDateTime(?, 'UTC')
FROM
(
    SELECT toStartOfHour(timestamp) AS hour, tool_name, server_name, server_version,
        arrayDistinct(counted_ignored_keys) AS keys
    FROM mcpulse.tool_calls FINAL
    WHERE is_error = 0 AND ignored_keys_source != 'not_measurable'
        AND timestamp >= toDateTime(?, 'UTC') AND timestamp < toDateTime(?, 'UTC') + 3600
        AND has(?, toUInt32(toStartOfHour(timestamp)))
)
ARRAY JOIN keys AS key_path
GROUP BY hour, tool_name, server_name, server_version, key_path
