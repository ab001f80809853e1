-- The tools that hold each server's schema ratchets back in its latest run that reached the
-- server: oversized tools (serialized input schema at or over the char limit; clients such as
-- Claude drop them) and tools with undescribed nested parameters (they pull the coverage
-- down), oversized first, then by undescribed count. Parameters, in order: tool twice
-- (String, '' = all), limit (UInt64: how many tools).
SELECT
    server,
    tool_name,
    started_at,
    schema_chars,
    oversized AS over_char_limit,
    toInt64(nested) - toInt64(described) AS undescribed_nested,
    if(nested = 0, 1., described / nested) AS nested_description_coverage,
    multiIf(
        oversized = 1 AND described < nested, 'oversized; undescribed nested properties',
        oversized = 1, 'oversized',
        'undescribed nested properties') AS why
FROM mcpulse.schema_check_tools FINAL
WHERE (server, run_id) IN
    (
        SELECT server, argMax(run_id, started_at)
        FROM mcpulse.schema_check_runs FINAL
        WHERE reached = 1
        GROUP BY server
    )
    AND (oversized = 1 OR described < nested)
    AND (? = '' OR tool_name = ?)
ORDER BY over_char_limit DESC, undescribed_nested DESC, schema_chars DESC, server, tool_name
LIMIT ?
