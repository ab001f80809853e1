-- Tool coverage per MCP server: the tools its latest version seen in traffic lists
-- ($mcp_tools_list, v_served_tool_schemas), how many of them a call in the range named, and
-- (up to 12 of) those never called: a tool agents never pick may be misnamed, undescribed or
-- shadowed by another. A call is matched by server name and tool name, whatever the version;
-- a call that named no server is matched by tool name alone. The MCP analytics SDK's virtual
-- tools (get_more_tools, send_feedback, or the names a server configured for them) are listed
-- like any tool but their calls are sent as $mcp_missing_capability and $mcp_feedback, not as
-- tool calls: they count as called when such a report named them (mcp_feedback.tool_name), by
-- server name and tool name. Parameters, in order: from, to (DateTime UTC: the hours starting
-- from..to, both included), three times.
SELECT
    server_name AS server,
    server_version,
    count() AS listed_tools,
    countIf(called) AS called_tools,
    called_tools / listed_tools AS coverage,
    listed_tools - called_tools AS never_called_tools,
    concat(arrayStringConcat(arraySlice(arraySort(groupArrayIf(tool_name, NOT called)), 1, 12), ', '),
        if(never_called_tools > 12, ', …', '')) AS never_called
FROM
(
    SELECT server_name, server_version, tool_name,
        (server_name, tool_name) IN
        (
            SELECT server_name, tool_name
            FROM mcpulse.v_tool_call_stats_hourly
            WHERE hour >= ? AND hour <= ? AND server_name != ''
            GROUP BY server_name, tool_name
        )
        OR tool_name IN
        (
            SELECT tool_name
            FROM mcpulse.v_tool_call_stats_hourly
            WHERE hour >= ? AND hour <= ? AND server_name = ''
            GROUP BY tool_name
        )
        OR (server_name, tool_name) IN
        (
            SELECT server_name, tool_name
            FROM mcpulse.mcp_feedback FINAL
            WHERE toStartOfHour(timestamp) >= ? AND toStartOfHour(timestamp) <= ?
            GROUP BY server_name, tool_name
        ) AS called
    FROM mcpulse.v_served_tool_schemas
    WHERE (server_name, server_version) IN
        (
            SELECT server_name, argMax(server_version, version_last_seen)
            FROM
            (
                SELECT server_name, server_version, max(last_seen) AS version_last_seen
                FROM mcpulse.v_served_tool_schemas
                GROUP BY server_name, server_version
            )
            GROUP BY server_name
        )
    GROUP BY server_name, server_version, tool_name
)
GROUP BY server_name, server_version
ORDER BY coverage, server_name
