-- panel_tools_by_ignored_key_rate computed from the deduplicated raw table tool_calls. Same
-- parameters.
SELECT
    tool_name,
    countIf(is_error = 0) AS successful_calls,
    countIf(is_error = 0 AND notEmpty(counted_ignored_keys)) AS calls_with_ignored_keys,
    calls_with_ignored_keys / successful_calls AS ignored_key_rate
FROM mcpulse.tool_calls FINAL
WHERE toStartOfHour(timestamp) >= ? AND toStartOfHour(timestamp) <= ?
    AND (? = '' OR client_name = ?)
    AND (? = '' OR tool_name = ?)
GROUP BY tool_name
HAVING successful_calls > 0 AND successful_calls >= ?
ORDER BY ignored_key_rate DESC, successful_calls DESC, tool_name
LIMIT ?
