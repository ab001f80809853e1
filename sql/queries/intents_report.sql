-- Intent prompt trials (DESIGN.md §8, "Intent prompt trials"): the tool calls of a range per
-- version of the mcp-intent-prompt flag's payload in force for the calling user's client.
--
-- Versions are the distinct first_seen times of the flag's rows in flag_payload_versions (any
-- variant), in order; version n (1-based) is in force for a call once that user's client
-- (distinct_id and client name, a folded client name as it was sent) has listed tools
-- (tools_list_events) at or after the version's first_seen and at or before the call: the
-- client's cached tool schemas carry the prompt of its latest listing. version_index 0 is the
-- SDK default: no recorded version, or no listing since the first one. label names the
-- version: per variant (sorted) 'variant sha256-prefix', or 'SDK default' for a removed
-- variant; '' for version 0.
--
-- Per version: calls; calls whose intent holds a non-space character; the 0.5 and 0.9
-- quantiles of those intents' words (runs of non-space characters; 0 when none); calls
-- whose intent holds any identifying detail; per kind (tool_calls.intent_details, migration
-- 0043) the calls holding it, one column details_<kind> per kind of intents/details.Patterns
-- in its order (a test holds the two equal); per kind found, one masked intent holding it
-- (intent_masked, never the intent itself: the one of least cityHash64, so every engine
-- picks the same), in the kinds' order.
--
-- Parameters, in order: from, to (DateTime UTC: calls at from..to, both included).
SELECT
    version_index,
    any(version_first_seen) AS first_seen,
    any(version_label) AS label,
    count() AS calls,
    countIf(has_intent) AS calls_with_intent,
    quantilesExactIf(0.5, 0.9)(toFloat64(words), has_intent) AS words_quantiles,
    countIf(notEmpty(intent_details)) AS calls_with_details,
    countIf(has(intent_details, 'url_credentials')) AS details_url_credentials,
    countIf(has(intent_details, 'api_key')) AS details_api_key,
    countIf(has(intent_details, 'email')) AS details_email,
    countIf(has(intent_details, 'home_path')) AS details_home_path,
    countIf(has(intent_details, 'ip_address')) AS details_ip_address,
    countIf(has(intent_details, 'phone')) AS details_phone,
    countIf(has(intent_details, 'id')) AS details_id,
    arrayFilter(x -> x != '', [
        argMinIf(intent_masked, cityHash64(intent_masked), has(intent_details, 'url_credentials')),
        argMinIf(intent_masked, cityHash64(intent_masked), has(intent_details, 'api_key')),
        argMinIf(intent_masked, cityHash64(intent_masked), has(intent_details, 'email')),
        argMinIf(intent_masked, cityHash64(intent_masked), has(intent_details, 'home_path')),
        argMinIf(intent_masked, cityHash64(intent_masked), has(intent_details, 'ip_address')),
        argMinIf(intent_masked, cityHash64(intent_masked), has(intent_details, 'phone')),
        argMinIf(intent_masked, cityHash64(intent_masked), has(intent_details, 'id'))
    ]) AS masked_examples
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
