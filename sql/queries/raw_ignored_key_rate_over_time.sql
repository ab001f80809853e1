-- panel_ignored_key_rate_over_time computed from the deduplicated raw table tool_calls (the
-- dashboards benchmark's peer, and a check of the panel): measurable as the rollup counts it
-- (a successful call whose ignored_keys_source is not 'not_measurable'). Same parameters.
SELECT
    toStartOfHour(timestamp) AS hour,
    tool_name,
    countIf(is_error = 0 AND ignored_keys_source != 'not_measurable') AS measurable_calls,
    countIf(is_error = 0 AND ignored_keys_source != 'not_measurable' AND notEmpty(counted_ignored_keys)) AS calls_with_ignored_keys,
    if(measurable_calls = 0, NULL, calls_with_ignored_keys / measurable_calls) AS ignored_key_rate
FROM mcpulse.tool_calls FINAL
WHERE toStartOfHour(timestamp) >= ? AND toStartOfHour(timestamp) <= ?
    AND (? = '' OR client_name = ?)
    AND (? = '' OR tool_name = ?)
GROUP BY hour, tool_name
HAVING measurable_calls > 0
ORDER BY hour, tool_name
