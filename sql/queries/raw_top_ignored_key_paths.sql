-- panel_top_ignored_key_paths computed from the deduplicated raw table tool_calls. Same
-- parameters.
SELECT tool_name, key_path, count() AS calls
FROM mcpulse.tool_calls FINAL
ARRAY JOIN counted_ignored_keys AS key_path
WHERE is_error = 0
    AND toStartOfHour(timestamp) >= ? AND toStartOfHour(timestamp) <= ?
    AND (? = '' OR tool_name = ?)
GROUP BY tool_name, key_path
ORDER BY tool_name, calls DESC, key_path
LIMIT ? BY tool_name
