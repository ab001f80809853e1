-- Each tool's ignored-key rate in the range beside its latest schema check (the newest row of
-- schema_check_tools for that tool name, whichever server served it): the serialized input
-- schema size in UTF-16 units, whether it is oversized, and its nested description coverage
-- (described / nested properties; 1 when there are none). Tools never checked have NULL
-- schema columns.
-- The rate divides by the successful calls whose ignored keys could be measured (NULL, shown
-- "not measured", when none could). Reads v_tool_call_stats_hourly.
-- Parameters, in order: from, to (DateTime UTC: the hours starting from..to, both included),
-- client twice, tool twice (String, '' = all), limit (UInt64: how many tools).
SELECT
    tool_name,
    calls AS successful_calls,
    ignored_key_rate,
    if(checked = 0, NULL, schema_server) AS server,
    if(checked = 0, NULL, schema_checked_at) AS checked_at,
    if(checked = 0, NULL, schema_size) AS schema_chars,
    if(checked = 0, NULL, schema_oversized) AS over_char_limit,
    if(checked = 0, NULL, if(schema_nested = 0, 1., schema_described / schema_nested)) AS nested_description_coverage
FROM
(
    SELECT
        tool_name,
        sum(successful_calls) AS calls,
        sum(measurable_calls) AS measurable,
        if(measurable = 0, NULL, sum(calls_with_ignored_keys) / measurable) AS ignored_key_rate
    FROM mcpulse.v_tool_call_stats_hourly
    WHERE hour >= ? AND hour <= ?
        AND (? = '' OR client_name = ?)
        AND (? = '' OR tool_name = ?)
    GROUP BY tool_name
    HAVING calls > 0
) AS rates
ANY LEFT JOIN
(
    SELECT
        tool_name,
        1 AS checked,
        max(started_at) AS schema_checked_at,
        argMax(server, started_at) AS schema_server,
        argMax(schema_chars, started_at) AS schema_size,
        argMax(oversized, started_at) AS schema_oversized,
        argMax(nested, started_at) AS schema_nested,
        argMax(described, started_at) AS schema_described
    FROM mcpulse.schema_check_tools FINAL
    GROUP BY tool_name
) AS latest_checks USING tool_name
ORDER BY ignored_key_rate DESC, calls DESC, tool_name
LIMIT ?
