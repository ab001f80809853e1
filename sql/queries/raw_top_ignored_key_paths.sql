-- panel_top_ignored_key_paths computed from the deduplicated raw table tool_calls. Same
-- parameters.
SELECT tool_name, key_path, calls
FROM
(
    SELECT tool_name, groupArray(key_path) AS paths, groupArray(path_calls) AS calls_per_path, sum(path_calls) AS tool_total
    FROM
    (
        SELECT tool_name, key_path, count() AS path_calls
        FROM mcpulse.tool_calls FINAL
        ARRAY JOIN counted_ignored_keys AS key_path
        WHERE is_error = 0
            AND toStartOfHour(timestamp) >= ? AND toStartOfHour(timestamp) <= ?
            AND (? = '' OR tool_name = ?)
        GROUP BY tool_name, key_path
    )
    GROUP BY tool_name
)
ARRAY JOIN paths AS key_path, calls_per_path AS calls
ORDER BY tool_total DESC, tool_name, calls DESC, key_path
LIMIT ? BY tool_name
