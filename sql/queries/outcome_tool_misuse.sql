-- The tool-call stats rollup summed per hour and tool (over clients and server versions): calls,
-- failed calls, calls refused for their input and calls to a tool the server does not list,
-- as the demo's expected outcome counts them (demo/outcome.ToolMisuse).
SELECT hour, tool_name, sum(calls) AS calls, sum(errors) AS errors,
    sum(validation_errors) AS validation_errors, sum(unknown_tool_calls) AS unknown_tool_calls
FROM mcpulse.v_tool_call_stats_hourly
GROUP BY hour, tool_name
ORDER BY hour, tool_name
