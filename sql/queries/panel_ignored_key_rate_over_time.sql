-- Ignored-key rate per tool and hour (DESIGN.md §4: calls with at least one counted ignored
-- key divided by successful calls) for the tools with the most successful calls in the range.
-- Reads v_ignored_key_rate_counts_hourly: sealed exact counts for closed hours, uniqExact
-- states after the seal watermark (migration 0008, jobs.SealIgnoredKeyRates).
-- Parameters, in order: from, to (DateTime UTC: the hours starting from..to, both included),
-- client twice, tool twice (String, '' = all), limit (UInt64: how many tools).
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
            hour,
            tool_name,
            sum(successful_calls) AS hour_calls,
            sum(calls_with_ignored_keys) AS hour_ignored
        FROM mcpulse.v_ignored_key_rate_counts_hourly
        WHERE hour >= ? AND hour <= ?
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
