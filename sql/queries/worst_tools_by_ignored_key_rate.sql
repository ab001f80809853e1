-- The tools with the highest ignored-key rate over all time, with their call volume.
-- Parameter: the number of tools (UInt64).
SELECT
    tool_name,
    sum(successful_calls) AS calls,
    sum(calls_with_ignored_keys) AS calls_with_ignored_keys,
    if(calls = 0, 0., calls_with_ignored_keys / calls) AS ignored_key_rate
FROM mcpulse.v_ignored_key_rates_hourly
GROUP BY tool_name
HAVING calls_with_ignored_keys > 0
ORDER BY ignored_key_rate DESC, calls DESC, tool_name
LIMIT ?
