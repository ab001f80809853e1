-- Tools ranked by ignored-key rate in the range, with their call volume (successful calls, and
-- those with at least one counted ignored key). Tools with fewer successful calls than the
-- minimum are left out: a rate over a handful of calls says little.
-- Reads v_ignored_key_rate_counts_hourly: plain counts (migration 0015).
-- Parameters, in order: from, to (DateTime UTC: the hours starting from..to, both included),
-- client twice, tool twice (String, '' = all), min_calls (UInt64: tools with fewer successful
-- calls are left out), limit (UInt64: how many tools).
SELECT
    tool_name,
    sum(successful_calls) AS successful_calls,
    sum(calls_with_ignored_keys) AS calls_with_ignored_keys,
    calls_with_ignored_keys / successful_calls AS ignored_key_rate
FROM mcpulse.v_ignored_key_rate_counts_hourly
WHERE hour >= ? AND hour <= ?
    AND (? = '' OR client_name = ?)
    AND (? = '' OR tool_name = ?)
GROUP BY tool_name
HAVING successful_calls > 0 AND successful_calls >= ?
ORDER BY ignored_key_rate DESC, successful_calls DESC, tool_name
LIMIT ?
