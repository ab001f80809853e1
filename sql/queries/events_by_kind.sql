-- Stored events per kind (ingest's table of kinds) after deduplication; every other name is
-- counted under `other`. Tools lists are stored as served schemas (one row per tool, folded by
-- content), so they are not counted here.
SELECT 'tool_call' AS kind, count() AS events FROM mcpulse.tool_calls FINAL
UNION ALL
SELECT kind, count() FROM mcpulse.recruitment_events FINAL GROUP BY kind
UNION ALL
SELECT 'initialize', count() FROM mcpulse.mcp_initialize_events FINAL
UNION ALL
SELECT 'exception', count() FROM mcpulse.mcp_exceptions FINAL
UNION ALL
SELECT 'other', count() FROM mcpulse.other_events FINAL
UNION ALL
SELECT kind, count() FROM mcpulse.mcp_feedback FINAL GROUP BY kind
UNION ALL
SELECT kind, count() FROM mcpulse.mcp_resource_prompt_events FINAL GROUP BY kind
UNION ALL
SELECT 'identify', count() FROM mcpulse.mcp_identify_events FINAL
