-- v_events_by_name_hourly recomputed from the deduplicated raw tables, to check the rollup: every
-- kind stored one row per event. ($mcp_tools_list events are stored as their listed tools, not
-- one row each, so outcome_events_by_name leaves them out of the comparison.)
SELECT hour, event, count() AS events
FROM
(
    SELECT toStartOfHour(timestamp) AS hour, '$mcp_tool_call' AS event FROM mcpulse.tool_calls FINAL
    UNION ALL
    SELECT toStartOfHour(timestamp) AS hour, multiIf(kind = 'invitation_sent', 'mcp interview invitation sent',
        kind = 'link_opened', 'mcp interview booking link opened', 'mcp interview invitation responded') AS event
    FROM mcpulse.recruitment_events FINAL
    UNION ALL
    SELECT toStartOfHour(timestamp) AS hour, '$mcp_initialize' AS event FROM mcpulse.mcp_initialize_events FINAL
    UNION ALL
    SELECT toStartOfHour(timestamp) AS hour, '$exception' AS event FROM mcpulse.mcp_exceptions FINAL
    UNION ALL
    SELECT toStartOfHour(timestamp) AS hour, event FROM mcpulse.other_events FINAL
    UNION ALL
    SELECT toStartOfHour(timestamp) AS hour, if(kind = 'feedback', '$mcp_feedback', '$mcp_missing_capability') AS event
    FROM mcpulse.mcp_feedback FINAL
    UNION ALL
    SELECT toStartOfHour(timestamp) AS hour, multiIf(kind = 'resources_list', '$mcp_resources_list',
        kind = 'resource_read', '$mcp_resource_read', kind = 'prompts_list', '$mcp_prompts_list', '$mcp_prompt_get') AS event
    FROM mcpulse.mcp_resource_prompt_events FINAL
    UNION ALL
    SELECT toStartOfHour(timestamp) AS hour, '$identify' AS event FROM mcpulse.mcp_identify_events FINAL
)
GROUP BY hour, event
