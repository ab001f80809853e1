-- panel_ignored_key_rate_over_time computed from the deduplicated raw table tool_calls (the
-- dashboards benchmark's peer, and a check of the panel). Same parameters.
SELECT
    toStartOfHour(timestamp) AS hour,
    tool_name,
    countIf(is_error = 0) AS successful_calls,
    countIf(is_error = 0 AND notEmpty(counted_ignored_keys)) AS calls_with_ignored_keys,
    if(successful_calls = 0, 0., calls_with_ignored_keys / successful_calls) AS ignored_key_rate
FROM mcpulse.tool_calls FINAL
WHERE toStartOfHour(timestamp) >= ? AND toStartOfHour(timestamp) <= ?
    AND (? = '' OR client_name = ?)
    AND (? = '' OR tool_name = ?)
GROUP BY hour, tool_name
HAVING successful_calls > 0
ORDER BY hour, tool_name
