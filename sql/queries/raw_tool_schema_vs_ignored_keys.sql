-- panel_tool_schema_vs_ignored_keys with the ignored-key rates computed from the deduplicated
-- raw table tool_calls (schema checks have no rollup). Same parameters.
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
        countIf(is_error = 0) AS calls,
        countIf(is_error = 0 AND ignored_keys_source != 'not_measurable') AS measurable,
        if(measurable = 0, NULL, countIf(is_error = 0 AND ignored_keys_source != 'not_measurable' AND notEmpty(counted_ignored_keys)) / measurable) AS ignored_key_rate
    FROM mcpulse.tool_calls FINAL
    WHERE toStartOfHour(timestamp) >= ? AND toStartOfHour(timestamp) <= ?
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
