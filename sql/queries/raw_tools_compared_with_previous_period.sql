-- panel_tools_compared_with_previous_period computed from the deduplicated raw table
-- tool_calls. Same parameters.
SELECT
    tool_name,
    countIf(is_error = 0 AND compared) AS successful_calls,
    countIf(is_error = 0 AND NOT compared) AS previous_successful_calls,
    if(previous_successful_calls = 0, NULL, successful_calls / previous_successful_calls - 1) AS calls_change,
    if(successful_calls = 0, NULL, countIf(is_error = 0 AND notEmpty(counted_ignored_keys) AND compared) / successful_calls) AS ignored_key_rate,
    if(previous_successful_calls = 0, NULL, countIf(is_error = 0 AND notEmpty(counted_ignored_keys) AND NOT compared) / previous_successful_calls) AS previous_ignored_key_rate,
    ignored_key_rate - previous_ignored_key_rate AS ignored_key_rate_change
FROM
(
    SELECT tool_name, is_error, counted_ignored_keys, toStartOfHour(timestamp) AS hour, hour >= ? AND hour <= ? AS compared
    FROM mcpulse.tool_calls FINAL
    WHERE ((hour >= ? AND hour <= ?) OR (hour >= ? AND hour <= ?))
        AND (? = '' OR client_name = ?)
        AND (? = '' OR tool_name = ?)
)
GROUP BY tool_name
HAVING successful_calls + previous_successful_calls >= ?
ORDER BY successful_calls DESC, tool_name
LIMIT ?
