-- Each tool's successful calls and ignored-key rate in the compared period beside the previous
-- period of the same length (the page's range, or the 24 hours before its end when it sets no
-- start; dashboards.Filters.Previous), the tools with the most calls first. A rate is NULL
-- (shown "not measured") where the period has no successful call. Parameters, in order:
-- period_from, period_to (DateTime UTC: the hours of the compared period), the same two again,
-- prev_from, prev_to (the previous period's hours), client twice, tool twice (String, '' =
-- all), min_calls (UInt64: tools with fewer successful calls in both periods together are left
-- out), limit (UInt64: how many tools).
SELECT
    tool_name,
    sumIf(ok_calls, compared) AS successful_calls,
    sumIf(ok_calls, NOT compared) AS previous_successful_calls,
    if(previous_successful_calls = 0, NULL, successful_calls / previous_successful_calls - 1) AS calls_change,
    if(successful_calls = 0, NULL, sumIf(ignored_calls, compared) / successful_calls) AS ignored_key_rate,
    if(previous_successful_calls = 0, NULL, sumIf(ignored_calls, NOT compared) / previous_successful_calls) AS previous_ignored_key_rate,
    ignored_key_rate - previous_ignored_key_rate AS ignored_key_rate_change
FROM
(
    SELECT tool_name, successful_calls AS ok_calls, calls_with_ignored_keys AS ignored_calls, hour >= ? AND hour <= ? AS compared
    FROM mcpulse.v_ignored_key_rate_counts_hourly
    WHERE ((hour >= ? AND hour <= ?) OR (hour >= ? AND hour <= ?))
        AND (? = '' OR client_name = ?)
        AND (? = '' OR tool_name = ?)
)
GROUP BY tool_name
HAVING successful_calls + previous_successful_calls >= ?
ORDER BY successful_calls DESC, tool_name
LIMIT ?
