-- Per MCP server and tool, for the alert rules ignored-keys-after-new-version and
-- validation-errors-after-new-version: when a server's newest version (by the first hour it
-- was called) appeared in the window, that version's ignored-key rate (over measurable
-- successful calls) and input-validation error rate in the window, beside the previous
-- version's over the previous period and the window (the hours it still served). Servers and
-- versions are those the calls name ($mcp_server_name, $mcp_server_version); calls naming none
-- are left out. Reads v_tool_call_stats_hourly. Parameters, in order: from, to (DateTime UTC:
-- the window's hours), from, to (the newest version first called in them), prev_from, to (the
-- previous version's hours: the previous period and the window), from, to (as the second pair).
SELECT
    server_name,
    tool_name,
    server_version,
    previous_version,
    calls,
    measurable_calls,
    ignored_key_rate,
    validation_error_rate,
    previous_calls,
    previous_measurable_calls,
    previous_ignored_key_rate,
    previous_validation_error_rate
FROM
(
    SELECT
        server_name,
        tool_name,
        server_version,
        sum(calls) AS calls,
        sum(measurable_calls) AS measurable_calls,
        if(measurable_calls = 0, NULL, sum(calls_with_ignored_keys) / measurable_calls) AS ignored_key_rate,
        sum(validation_errors) / calls AS validation_error_rate
    FROM mcpulse.v_tool_call_stats_hourly
    WHERE hour >= ? AND hour <= ?
        AND (server_name, server_version) IN
        (
            SELECT server_name, tupleElement(vs[-1], 1)
            FROM
            (
                SELECT server_name, arraySort(v -> tupleElement(v, 2), groupArray((server_version, first_hour))) AS vs
                FROM
                (
                    SELECT server_name, server_version, min(hour) AS first_hour
                    FROM mcpulse.v_tool_call_stats_hourly
                    WHERE server_name != '' AND server_version != ''
                    GROUP BY server_name, server_version
                )
                GROUP BY server_name
            )
            WHERE length(vs) >= 2 AND tupleElement(vs[-1], 2) >= ? AND tupleElement(vs[-1], 2) <= ?
        )
    GROUP BY server_name, tool_name, server_version
) AS fresh
ALL INNER JOIN
(
    SELECT
        server_name,
        tool_name,
        server_version AS previous_version,
        sum(calls) AS previous_calls,
        sum(measurable_calls) AS previous_measurable_calls,
        if(previous_measurable_calls = 0, NULL, sum(calls_with_ignored_keys) / previous_measurable_calls) AS previous_ignored_key_rate,
        sum(validation_errors) / previous_calls AS previous_validation_error_rate
    FROM mcpulse.v_tool_call_stats_hourly
    WHERE hour >= ? AND hour <= ?
        AND (server_name, server_version) IN
        (
            SELECT server_name, tupleElement(vs[-2], 1)
            FROM
            (
                SELECT server_name, arraySort(v -> tupleElement(v, 2), groupArray((server_version, first_hour))) AS vs
                FROM
                (
                    SELECT server_name, server_version, min(hour) AS first_hour
                    FROM mcpulse.v_tool_call_stats_hourly
                    WHERE server_name != '' AND server_version != ''
                    GROUP BY server_name, server_version
                )
                GROUP BY server_name
            )
            WHERE length(vs) >= 2 AND tupleElement(vs[-1], 2) >= ? AND tupleElement(vs[-1], 2) <= ?
        )
    GROUP BY server_name, tool_name, server_version
) AS before USING (server_name, tool_name)
ORDER BY server_name, tool_name
