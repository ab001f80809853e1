-- Per MCP server and schema check run: how many tools were oversized (serialized input schema
-- at or over the run's char limit) against the ratchet max_oversized, one series each
-- ("<server>: oversized", "<server>: max_oversized"). Runs that could not reach their server
-- are left out (they checked no tool). Parameters, in order: from, to (DateTime UTC: runs
-- started from..to, both included).
SELECT started_at, concat(server, ': ', measure) AS series, value
FROM
(
    SELECT started_at, server, oversized, max_oversized
    FROM mcpulse.schema_check_runs FINAL
    WHERE reached = 1 AND started_at >= ? AND started_at <= ?
)
ARRAY JOIN ['oversized', 'max_oversized'] AS measure, [oversized, max_oversized] AS value
ORDER BY started_at, series
