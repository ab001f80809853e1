-- The most frequent ignored key paths of each tool in the range: calls is the number of
-- successful calls that reported the path (array items by index, e.g. "filters.0.kind"),
-- the tools whose paths were reported most often first.
-- Parameters, in order: from, to (DateTime UTC: the hours starting from..to, both included),
-- tool twice (String, '' = all), limit (UInt64: how many paths per tool).
SELECT tool_name, key_path, calls
FROM
(
    SELECT tool_name, groupArray(key_path) AS paths, groupArray(path_calls) AS calls_per_path, sum(path_calls) AS tool_total
    FROM
    (
        SELECT tool_name, key_path, sum(occurrences) AS path_calls
        FROM mcpulse.v_ignored_key_paths_hourly
        WHERE hour >= ? AND hour <= ?
            AND (? = '' OR tool_name = ?)
        GROUP BY tool_name, key_path
    )
    GROUP BY tool_name
)
ARRAY JOIN paths AS key_path, calls_per_path AS calls
ORDER BY tool_total DESC, tool_name, calls DESC, key_path
LIMIT ? BY tool_name
