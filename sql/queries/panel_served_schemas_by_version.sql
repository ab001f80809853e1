-- Tool schemas seen in traffic ($mcp_tools_list events), per MCP server and version last seen in
-- the range: tools listed, tools with no snapshot the SDK left whole (their sizes are lower
-- bounds), schema changes within the version (snapshots beyond one per tool), and when the
-- version was first and last seen. Parameters, in order: from, to (DateTime UTC: versions last
-- seen from..to, both included).
SELECT
    server_name,
    server_version,
    count() AS tools,
    sum(truncated) AS truncated_tools,
    toUInt64(sum(snapshots) - count()) AS schema_changes,
    min(first_seen) AS first_seen,
    max(last_seen) AS last_seen
FROM
(
    SELECT server_name, server_version, tool_name, min(truncated) AS truncated, count() AS snapshots,
        min(first_seen) AS first_seen, max(last_seen) AS last_seen
    FROM
    (
        SELECT
            server_name,
            server_version,
            tool_name,
            schema_sha256,
            maxMerge(truncated) AS truncated,
            minMerge(first_seen) AS first_seen,
            maxMerge(last_seen) AS last_seen
        FROM mcpulse.served_tool_schemas
        GROUP BY server_name, server_version, tool_name, schema_sha256
    )
    GROUP BY server_name, server_version, tool_name
)
GROUP BY server_name, server_version
HAVING last_seen >= ? AND last_seen <= ?
ORDER BY server_name, last_seen DESC, server_version
