-- Error rate per tool and hour (errors / calls), every tool with a call in the range: the
-- dashboards keep the busiest tools and fold the rest into "other" from these counts. Reads
-- v_tool_call_stats_hourly. Parameters, in order: from, to (DateTime UTC: the hours starting
-- from..to, both included), client twice, tool twice (String, '' = all).
SELECT hour, tool_name, sum(calls) AS calls, sum(errors) AS errors, errors / calls AS error_rate
FROM mcpulse.v_tool_call_stats_hourly
WHERE hour >= ? AND hour <= ?
    AND (? = '' OR client_name = ?)
    AND (? = '' OR tool_name = ?)
GROUP BY hour, tool_name
ORDER BY hour, tool_name
