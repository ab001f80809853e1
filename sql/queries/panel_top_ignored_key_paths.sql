-- The most frequent ignored key paths of each tool in the range: occurrences is the number of
-- successful calls that reported the path (array items by index, e.g. "filters.0.kind").
-- Parameters, in order: from, to (DateTime UTC: the hours starting from..to, both included),
-- tool twice (String, '' = all), limit (UInt64: how many paths per tool).
SELECT tool_name, key_path, uniqExactMerge(occurrences) AS calls
FROM mcpulse.ignored_keys_hourly
WHERE hour >= ? AND hour <= ?
    AND (? = '' OR tool_name = ?)
GROUP BY tool_name, key_path
ORDER BY tool_name, calls DESC, key_path
LIMIT ? BY tool_name
