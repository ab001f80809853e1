-- v_ignored_key_paths_hourly recomputed from the deduplicated raw table, to check the rollup:
-- per path, the successful calls with measurable ignored keys that list it (once per call).
SELECT hour, tool_name, server_name, server_version, key_path, count() AS occurrences
FROM
(
    SELECT toStartOfHour(timestamp) AS hour, tool_name, server_name, server_version,
        arrayDistinct(counted_ignored_keys) AS keys
    FROM mcpulse.tool_calls FINAL
    WHERE is_error = 0 AND ignored_keys_source != 'not_measurable'
)
ARRAY JOIN keys AS key_path
GROUP BY hour, tool_name, server_name, server_version, key_path
