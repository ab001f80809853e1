-- The closed hours that need a seal (migration 0037), oldest first: every hour in which the
-- rollups count tool calls and that has no seal, or whose rollup rows changed since its seal
-- (a late event, rollup rows stored after the seal counted the raw rows, or a replay's). With
-- the count the rollups hold now (events_by_name_hourly's $mcp_tool_call events, summed over
-- partitions) and the sum of those rows' versions.
-- Parameters: the first hour not closed yet (DateTime, Unix seconds).
SELECT hour, rollup_calls, rollup_versions
FROM
(
    SELECT hour, sum(events) AS rollup_calls, sum(version) AS rollup_versions
    FROM mcpulse.events_by_name_hourly FINAL
    WHERE event = '$mcp_tool_call' AND hour < toDateTime(?, 'UTC')
    GROUP BY hour
    HAVING rollup_calls > 0
) AS counted
ANY LEFT JOIN
(
    SELECT hour, rollup_calls AS sealed_rollup_calls, rollup_versions AS sealed_rollup_versions, 1 AS sealed
    FROM mcpulse.rollup_sealed_hours FINAL
) AS seals USING (hour)
WHERE sealed = 0 OR sealed_rollup_calls != rollup_calls OR sealed_rollup_versions != rollup_versions
ORDER BY hour
