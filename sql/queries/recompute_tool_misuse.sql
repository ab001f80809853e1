-- outcome_tool_misuse recomputed from the deduplicated raw table, to check the rollup: per hour
-- and tool, calls, failed calls, calls refused for their input (error class validation_*) and
-- calls to a tool the server does not list (not listed by its server version, or refused by it
-- as unknown), as package consumers/rollup derives them.
SELECT
    toStartOfHour(timestamp) AS hour,
    tool_name,
    count() AS calls,
    countIf(is_error = 1) AS errors,
    countIf(startsWith(error_class, 'validation_')) AS validation_errors,
    countIf(unknown_tool = 1 OR error_class = 'unknown_tool') AS unknown_tool_calls
FROM mcpulse.tool_calls FINAL
GROUP BY hour, tool_name
ORDER BY hour, tool_name
