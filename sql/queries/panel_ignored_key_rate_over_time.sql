-- Ignored-key rate per tool and hour: successful calls with at least one counted ignored key
-- divided by the successful calls whose ignored keys could be measured (NULL, shown "not
-- measured", in an hour without such a call), every tool with a measurable call in the range:
-- the dashboards keep the tools with the most measurable calls and fold the rest into "other"
-- from these counts. Reads v_tool_call_stats_hourly. Parameters, in order: from, to (DateTime
-- UTC: the hours starting from..to, both included), client twice, tool twice (String, '' = all).
SELECT
    hour,
    tool_name,
    sum(measurable_calls) AS measurable_calls,
    sum(calls_with_ignored_keys) AS calls_with_ignored_keys,
    if(measurable_calls = 0, NULL, calls_with_ignored_keys / measurable_calls) AS ignored_key_rate
FROM mcpulse.v_tool_call_stats_hourly
WHERE hour >= ? AND hour <= ?
    AND (? = '' OR client_name = ?)
    AND (? = '' OR tool_name = ?)
GROUP BY hour, tool_name
HAVING measurable_calls > 0
ORDER BY hour, tool_name
