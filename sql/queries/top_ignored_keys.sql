-- The most frequent ignored key paths per tool over all time. Parameter: the number of paths
-- per tool (UInt64).
SELECT tool_name, key_path, sum(occurrences) AS occurrences
FROM mcpulse.v_ignored_keys_hourly
GROUP BY tool_name, key_path
ORDER BY tool_name, occurrences DESC, key_path
LIMIT ? BY tool_name
