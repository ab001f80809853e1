-- Stored events per kind after deduplication.
SELECT 'tool_call' AS kind, count() AS events FROM mcpulse.tool_calls FINAL
UNION ALL
SELECT kind, count() FROM mcpulse.recruitment_events FINAL GROUP BY kind
