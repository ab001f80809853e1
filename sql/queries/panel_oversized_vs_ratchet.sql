-- Per MCP server and schema check run: how many tools were oversized (serialized input schema
-- at or over the run's char limit), beside the ratchet max_oversized the run was checked
-- against (the run breaks when oversized goes above it). Runs that could not reach their
-- server are left out (they checked no tool). Parameters, in order: from, to (DateTime UTC:
-- runs started from..to, both included).
SELECT started_at, server, oversized, max_oversized
FROM mcpulse.schema_check_runs FINAL
WHERE reached = 1 AND started_at >= ? AND started_at <= ?
ORDER BY started_at, server
