-- Rows per table after deduplication (FINAL collapses re-inserted events).
SELECT 'tool_calls' AS table_name, count() AS rows FROM mcpulse.tool_calls FINAL
UNION ALL
SELECT 'recruitment_events', count() FROM mcpulse.recruitment_events FINAL
UNION ALL
SELECT 'dead_letters', count() FROM mcpulse.dead_letters FINAL
