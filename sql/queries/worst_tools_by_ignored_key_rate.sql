-- The tools with the highest ignored-key rate over all time: calls with ignored keys ÷ the
-- successful calls whose ignored keys could be measured (DESIGN.md §8, "Rates over what could
-- be measured"), the rate the Tool diagnostics dashboard shows, with those calls' count.
-- Parameter: the number of tools (UInt64).
SELECT
    tool_name,
    sum(measurable_calls) AS calls,
    sum(calls_with_ignored_keys) AS calls_with_ignored_keys,
    if(calls = 0, 0., calls_with_ignored_keys / calls) AS ignored_key_rate
FROM mcpulse.v_tool_call_stats_hourly
GROUP BY tool_name
HAVING calls_with_ignored_keys > 0
ORDER BY ignored_key_rate DESC, calls DESC, tool_name
LIMIT ?
