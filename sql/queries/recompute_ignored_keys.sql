-- v_ignored_keys_hourly recomputed from the deduplicated raw table, to check the rollup.
SELECT toStartOfHour(timestamp) AS hour, tool_name, key_path, count() AS occurrences
FROM mcpulse.tool_calls FINAL
ARRAY JOIN counted_ignored_keys AS key_path
WHERE is_error = 0
GROUP BY hour, tool_name, key_path
