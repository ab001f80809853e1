-- Intent prompt trials (DESIGN.md §8, "Intent prompt trials"): per version of the
-- mcp-intent-prompt payload in force for the calling user's client, attributed exactly as
-- intents_report.sql attributes it (`mcpulse intents report`; the same attribution text), the
-- tool calls of the range: calls, those whose intent holds a non-space character, the blank
-- share (of calls), the exact median and 0.9 quantile of the intents' words (NULL without
-- intents), the intents holding any identifying detail (tool_calls.intent_details, found at
-- ingest) and their share of the intents (NULL without intents). intent_version is "SDK
-- default" (no recorded version, or no listing since the first) or per variant
-- "variant sha256-prefix" (untrusted: shown escaped); first_seen is when the lint job first
-- saw the version (NULL for the SDK default). Parameters, in order: from, to (DateTime UTC:
-- calls at from..to, both included).
SELECT
    if(version_index = 0, 'SDK default', any(version_label)) AS intent_version,
    if(version_index = 0, NULL, any(version_first_seen)) AS first_seen,
    count() AS calls,
    countIf(has_intent) AS calls_with_intent,
    (count() - countIf(has_intent)) / count() AS blank_share,
    if(countIf(has_intent) = 0, NULL, quantileExactIf(0.5)(toFloat64(words), has_intent)) AS words_median,
    if(countIf(has_intent) = 0, NULL, quantileExactIf(0.9)(toFloat64(words), has_intent)) AS words_p90,
    countIf(notEmpty(intent_details)) AS calls_with_details,
    if(countIf(has_intent) = 0, NULL, countIf(notEmpty(intent_details)) / countIf(has_intent)) AS detail_share
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
        intent_masked
    FROM
    (
        SELECT timestamp, intent, intent_details, intent_masked, times
        FROM
        (
            SELECT distinct_id, if(folded_client_name != '', folded_client_name, client_name) AS client,
                timestamp, intent, intent_details, intent_masked
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
GROUP BY version_index
ORDER BY version_index
