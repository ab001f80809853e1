-- Every row of the events-by-name rollup, but the $mcp_tools_list events (no raw table holds
-- them one row each: see recompute_events_by_name).
SELECT hour, event, events
FROM mcpulse.v_events_by_name_hourly
WHERE event != '$mcp_tools_list'
