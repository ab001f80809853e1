-- panel_ignored_key_rate_over_time computed from the deduplicated raw table tool_calls (the
-- dashboards benchmark's peer, and a check of the panel). Same parameters.
SELECT
    hour,
    tool_name,
    successful_calls,
    calls_with_ignored_keys,
    if(successful_calls = 0, 0., calls_with_ignored_keys / successful_calls) AS ignored_key_rate
FROM
(
    SELECT
        tool_name,
        groupArray(hour) AS hours,
        groupArray(hour_calls) AS calls_per_hour,
        groupArray(hour_ignored) AS ignored_per_hour,
        sum(hour_calls) AS tool_calls
    FROM
    (
        SELECT
            toStartOfHour(timestamp) AS hour,
            tool_name,
            countIf(is_error = 0) AS hour_calls,
            countIf(is_error = 0 AND notEmpty(counted_ignored_keys)) AS hour_ignored
        FROM mcpulse.tool_calls FINAL
        WHERE toStartOfHour(timestamp) >= ? AND toStartOfHour(timestamp) <= ?
            AND (? = '' OR client_name = ?)
            AND (? = '' OR tool_name = ?)
        GROUP BY hour, tool_name
    )
    GROUP BY tool_name
    ORDER BY tool_calls DESC, tool_name
    LIMIT ?
)
ARRAY JOIN hours AS hour, calls_per_hour AS successful_calls, ignored_per_hour AS calls_with_ignored_keys
ORDER BY hour, tool_name
