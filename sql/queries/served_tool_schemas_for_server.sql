-- The tools one MCP server version serves, as seen in its $mcp_tools_list events: one row per
-- tool, its best snapshot (an untruncated one before one the SDK cut, then the most recently
-- seen). The consumer's served-schema cache and the schema ratchet on traffic
-- (schemacheck.LoadFromTraffic) read tools through this query. Parameters, in order:
-- server_name String, server_version String ('' is a server that reported no version).
SELECT
    tool_name,
    schema_sha256,
    anyMerge(input_schema) AS input_schema,
    argMaxMerge(description) AS description,
    maxMerge(truncated) AS truncated,
    minMerge(first_seen) AS first_seen,
    maxMerge(last_seen) AS last_seen
FROM mcpulse.served_tool_schemas
WHERE server_name = ? AND server_version = ?
GROUP BY tool_name, schema_sha256
ORDER BY tool_name, truncated, last_seen DESC, schema_sha256
LIMIT 1 BY tool_name
