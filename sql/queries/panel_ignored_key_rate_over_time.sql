-- Ignored-key rate per tool and hour (DESIGN.md §4: calls with at least one counted ignored
-- key divided by successful calls), every tool with a successful call in the range: the
-- dashboards keep the tools with the most successful calls and fold the rest into "other"
-- from these counts. Reads v_ignored_key_rate_counts_hourly: plain counts (migration 0015).
-- Parameters, in order: from, to (DateTime UTC: the hours starting from..to, both included),
-- client twice, tool twice (String, '' = all).
SELECT
    hour,
    tool_name,
    sum(successful_calls) AS successful_calls,
    sum(calls_with_ignored_keys) AS calls_with_ignored_keys,
    if(successful_calls = 0, 0., calls_with_ignored_keys / successful_calls) AS ignored_key_rate
FROM mcpulse.v_ignored_key_rate_counts_hourly
WHERE hour >= ? AND hour <= ?
    AND (? = '' OR client_name = ?)
    AND (? = '' OR tool_name = ?)
GROUP BY hour, tool_name
HAVING successful_calls > 0
ORDER BY hour, tool_name
