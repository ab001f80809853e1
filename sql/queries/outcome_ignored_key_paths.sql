-- Every row of the ignored key paths rollup (per MCP server).
SELECT hour, tool_name, server_name, server_version, key_path, occurrences
FROM mcpulse.v_ignored_key_paths_hourly
