-- Intent prompt trials, per call (DESIGN.md §8, "Intent prompt trials"): every tool call of a
-- range with the payload version attributed to it exactly as intents_report.sql attributes it
-- (the two share their attribution text; a test holds them equal), for offline evaluation
-- (`mcpulse intents report --export`). The intent is given masked only (intent_masked,
-- migration 0043), with the kinds of detail it held (intent_details) and its words.
--
-- Parameters, in order: from, to (DateTime UTC: calls at from..to, both included).
SELECT
    timestamp,
    distinct_id,
    client,
    conversation_id,
    tool_name,
    version_index,
    version_label,
    has_intent,
    words,
    intent_details,
    intent_masked
FROM
(
    SELECT
        arrayReduce('max', arrayFilter((x, t) -> x <= t, times, arrayResize([timestamp], length(times), timestamp))) AS last_listed,
        (
            SELECT arraySort(groupArray(first_seen))
            FROM (SELECT DISTINCT first_seen FROM mcpulse.flag_payload_versions FINAL WHERE flag_key = 'mcp-intent-prompt')
        ) AS versions,
        toUInt32(arrayCount((v, l) -> v <= l, versions, arrayResize([last_listed], length(versions), last_listed))) AS version_index,
        if(version_index = 0, toDateTime(0), versions[version_index]) AS version_first_seen,
        if(version_index = 0, '', (
            SELECT arrayMap(v -> tupleElement(v, 2), arraySort(groupArray((first_seen, label))))
            FROM
            (
                SELECT first_seen, arrayStringConcat(arraySort(groupArray(
                    if(removed = 1, 'SDK default', concat(variant, ' ', substring(payload_sha256, 1, 12))))), ', ') AS label
                FROM mcpulse.flag_payload_versions FINAL
                WHERE flag_key = 'mcp-intent-prompt'
                GROUP BY first_seen
            )
        )[version_index]) AS version_label,
        match(intent, '[^ \\t\\n\\r]') AS has_intent,
        toUInt64(length(extractAll(intent, '[^ \\t\\n\\r]+'))) AS words,
        intent_details,
        intent_masked,
        timestamp,
        distinct_id,
        client,
        conversation_id,
        tool_name
    FROM
    (
        SELECT timestamp, intent, intent_details, intent_masked, conversation_id, tool_name, distinct_id, client, times
        FROM
        (
            SELECT distinct_id, if(folded_client_name != '', folded_client_name, client_name) AS client,
                timestamp, intent, intent_details, intent_masked, conversation_id, tool_name
            FROM mcpulse.tool_calls FINAL
            WHERE timestamp >= ? AND timestamp <= ?
        ) AS calls
        ANY LEFT JOIN
        (
            SELECT distinct_id, client_name AS client, groupArray(listed_at) AS times
            FROM mcpulse.tools_list_events FINAL
            GROUP BY distinct_id, client_name
        ) AS listings USING distinct_id, client
    ) AS joined
) AS attributed
ORDER BY timestamp, distinct_id, client, conversation_id, tool_name, intent_masked
