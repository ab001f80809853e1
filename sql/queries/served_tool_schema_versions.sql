-- The versions of one MCP server seen in traffic, most recently seen first: how many tools each
-- served, how many of those have no snapshot the SDK left whole (their sizes are lower bounds),
-- how many schema changes were seen within the version (snapshots beyond one per tool), and
-- when. The schema ratchet on traffic checks the first row's version unless told one.
-- Parameters, in order: server_name String.
SELECT
    server_version,
    count() AS tools,
    sum(truncated) AS truncated_tools,
    toUInt64(sum(snapshots) - count()) AS schema_changes,
    min(first_seen) AS first_seen,
    max(last_seen) AS last_seen
FROM
(
    SELECT server_version, tool_name, min(truncated) AS truncated, count() AS snapshots,
        min(first_seen) AS first_seen, max(last_seen) AS last_seen
    FROM
    (
        SELECT
            server_version,
            tool_name,
            schema_sha256,
            maxMerge(truncated) AS truncated,
            minMerge(first_seen) AS first_seen,
            maxMerge(last_seen) AS last_seen
        FROM mcpulse.served_tool_schemas
        WHERE server_name = ?
        GROUP BY server_version, tool_name, schema_sha256
    )
    GROUP BY server_version, tool_name
)
GROUP BY server_version
ORDER BY last_seen DESC, server_version DESC
