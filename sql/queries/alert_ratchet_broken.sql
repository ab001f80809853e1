-- Per MCP server, for the alert rule ratchet-broken: whether its latest schema check in the
-- window that reached the server broke a ratchet (1) or held (0), how many such runs there
-- were, and the latest run's violations. A run that could not reach its server neither breaks
-- nor mends the ratchet, and neither does a saved tools file checked by hand (source 'file':
-- not what production serves). Parameters, in order: from, to (DateTime UTC: runs started
-- from..to, both included).
SELECT
    server,
    argMax(toFloat64(1 - ok), started_at) AS ratchet_broken,
    count() AS runs,
    argMax(arrayStringConcat(violations, '; '), started_at) AS violations
FROM mcpulse.schema_check_runs FINAL
WHERE reached = 1 AND source != 'file' AND started_at >= ? AND started_at <= ?
GROUP BY server
ORDER BY server
