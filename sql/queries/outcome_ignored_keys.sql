-- Every row of the ignored key paths rollup.
SELECT hour, tool_name, key_path, occurrences
FROM mcpulse.v_ignored_keys_hourly
