-- panel_error_rate_over_time computed from the deduplicated raw table tool_calls. Same
-- parameters.
SELECT toStartOfHour(timestamp) AS hour, tool_name, count() AS calls, countIf(is_error = 1) AS errors, errors / calls AS error_rate
FROM mcpulse.tool_calls FINAL
WHERE toStartOfHour(timestamp) >= ? AND toStartOfHour(timestamp) <= ?
    AND (? = '' OR client_name = ?)
    AND (? = '' OR tool_name = ?)
GROUP BY hour, tool_name
ORDER BY hour, tool_name
