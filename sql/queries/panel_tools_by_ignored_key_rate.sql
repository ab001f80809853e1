-- Tools ranked by ignored-key rate in the range, with their call volume (successful calls, and
-- those with at least one counted ignored key). Tools without a successful call are left out.
-- Closed hours come from ignored_key_rates_hourly_sealed (plain exact counts, the newest seal of
-- each key by FINAL) below the newest watermark in rollup_seals; later hours (all of them
-- before the first seal, when the watermark reads 1970-01-01) come from the uniqExact states,
-- merged per hour, tool and client first. A tool call's uuid has one hour, tool and client, so
-- the keys' sets are disjoint and their counts add up (jobs.SealIgnoredKeyRates).
-- Parameters, in order: from, to (DateTime UTC: the hours starting from..to, both included),
-- client twice, tool twice (String, '' = all), limit (UInt64: how many tools).
SELECT
    tool_name,
    sum(key_calls) AS calls,
    sum(key_ignored) AS calls_with_ignored,
    calls_with_ignored / calls AS ignored_key_rate
FROM
(
    SELECT
        hour,
        tool_name,
        client_name,
        successful_calls AS key_calls,
        calls_with_ignored_keys AS key_ignored
    FROM mcpulse.ignored_key_rates_hourly_sealed FINAL
    WHERE hour < (SELECT max(sealed_through) FROM mcpulse.rollup_seals FINAL WHERE rollup = 'ignored_key_rates_hourly')
    UNION ALL
    SELECT
        hour,
        tool_name,
        client_name,
        uniqExactMerge(successful_calls) AS key_calls,
        uniqExactMerge(calls_with_ignored_keys) AS key_ignored
    FROM mcpulse.ignored_key_rates_hourly
    WHERE hour >= (SELECT max(sealed_through) FROM mcpulse.rollup_seals FINAL WHERE rollup = 'ignored_key_rates_hourly')
    GROUP BY hour, tool_name, client_name
)
WHERE hour >= ? AND hour <= ?
    AND (? = '' OR client_name = ?)
    AND (? = '' OR tool_name = ?)
GROUP BY tool_name
HAVING calls > 0
ORDER BY ignored_key_rate DESC, calls DESC, tool_name
LIMIT ?
