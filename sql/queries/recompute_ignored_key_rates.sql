-- v_ignored_key_rates_hourly recomputed from the deduplicated raw table, to check the rollup.
SELECT
    toStartOfHour(timestamp) AS hour,
    tool_name,
    client_name,
    countIf(is_error = 0) AS successful_calls,
    countIf(is_error = 0 AND notEmpty(counted_ignored_keys)) AS calls_with_ignored_keys
FROM mcpulse.tool_calls FINAL
GROUP BY hour, tool_name, client_name
