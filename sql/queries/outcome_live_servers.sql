-- Per server and tool, what the tool-call stats rollup holds of the demo's live servers (their
-- names start with 'radar-', demo/live.ServerPrefix), summed over
-- hours, clients and versions: calls, failed calls, calls refused for their input, calls to a
-- tool the server does not list, successful calls whose ignored keys could be measured and
-- those with ignored keys; beside them the distinct ignored key paths of the raw calls.
-- The demo checks its live servers with it (demo/live.Observe).
SELECT s.server_name, s.tool_name, calls, errors, validation_errors, unknown_tool_calls, measurable_calls,
    calls_with_ignored_keys, ifNull(k.keys, emptyArrayString()) AS ignored_keys
FROM
(
    SELECT server_name, tool_name, sum(calls) AS calls, sum(errors) AS errors,
        sum(validation_errors) AS validation_errors, sum(unknown_tool_calls) AS unknown_tool_calls,
        sum(measurable_calls) AS measurable_calls, sum(calls_with_ignored_keys) AS calls_with_ignored_keys
    FROM mcpulse.v_tool_call_stats_hourly
    WHERE startsWith(server_name, 'radar-')
    GROUP BY server_name, tool_name
) AS s
ANY LEFT JOIN
(
    SELECT server_name, tool_name, arraySort(groupUniqArrayArray(counted_ignored_keys)) AS keys
    FROM mcpulse.tool_calls FINAL
    WHERE startsWith(server_name, 'radar-')
    GROUP BY server_name, tool_name
) AS k USING (server_name, tool_name)
ORDER BY s.server_name, s.tool_name
