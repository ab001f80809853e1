-- Per MCP server and schema check run: the nested parameter description coverage (described
-- nested properties / nested properties, pooled over the server's tools), beside the ratchet
-- min_nested_coverage the run was checked against (the run breaks when coverage falls below
-- it). Runs that could not reach their server are left out. Parameters, in order: from, to
-- (DateTime UTC: runs started from..to, both included).
SELECT started_at, server, nested_description_coverage, min_nested_coverage
FROM mcpulse.schema_check_runs FINAL
WHERE reached = 1 AND started_at >= ? AND started_at <= ?
ORDER BY started_at, server
