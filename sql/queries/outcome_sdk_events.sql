-- The MCP analytics SDK's reports and requests besides tool calls, per kind, subject and client:
-- events stored and failed ones (demo/outcome SDKEvent). The subject is what agents said was
-- missing (missing_capability), the feedback type (feedback), the uri (resource_read), the
-- prompt's name (prompt_get), '' for listings and identifies.
SELECT kind, subject, client_name, count() AS events, sum(is_error) AS errors
FROM
(
    SELECT kind, if(kind = 'missing_capability', intent, feedback_type) AS subject, client_name, is_error
    FROM mcpulse.mcp_feedback FINAL
    UNION ALL
    SELECT kind, if(kind IN ('resources_list', 'prompts_list'), '', name) AS subject, client_name, is_error
    FROM mcpulse.mcp_resource_prompt_events FINAL
    UNION ALL
    SELECT 'identify' AS kind, '' AS subject, client_name, toUInt8(0) AS is_error
    FROM mcpulse.mcp_identify_events FINAL
)
GROUP BY kind, subject, client_name
