-- Intent prompt trials (DESIGN.md §8, "Intent prompt trials"): per version of the
-- mcp-intent-prompt payload (attributed as intents_report.sql attributes it; the same
-- attribution text) and kind of identifying detail found in the intents at ingest
-- (tool_calls.intent_details: url_credentials, api_key, email, home_path, ip_address, phone,
-- id), the calls whose intent holds it, their share of the version's intents (calls with a
-- non-space intent), and one masked intent holding it (intent_masked: each detail replaced by
-- its kind's placeholder, never the intent itself; the one of least cityHash64, so every
-- engine picks the same; untrusted, shown escaped). Kinds no intent held are left out.
-- Parameters, in order: from, to (DateTime UTC: calls at from..to, both included).
SELECT
    intent_version,
    detail_kind,
    calls_with_kind,
    calls_with_kind / intents AS share_of_intents,
    masked_example
FROM
(
    SELECT
        version_index,
        if(version_index = 0, 'SDK default', any(version_label)) AS intent_version,
        countIf(has_intent) AS intents,
        ['url_credentials', 'api_key', 'email', 'home_path', 'ip_address', 'phone', 'id'] AS kinds,
        [
            countIf(has(intent_details, 'url_credentials')),
            countIf(has(intent_details, 'api_key')),
            countIf(has(intent_details, 'email')),
            countIf(has(intent_details, 'home_path')),
            countIf(has(intent_details, 'ip_address')),
            countIf(has(intent_details, 'phone')),
            countIf(has(intent_details, 'id'))
        ] AS kind_calls,
        [
            argMinIf(intent_masked, cityHash64(intent_masked), has(intent_details, 'url_credentials')),
            argMinIf(intent_masked, cityHash64(intent_masked), has(intent_details, 'api_key')),
            argMinIf(intent_masked, cityHash64(intent_masked), has(intent_details, 'email')),
            argMinIf(intent_masked, cityHash64(intent_masked), has(intent_details, 'home_path')),
            argMinIf(intent_masked, cityHash64(intent_masked), has(intent_details, 'ip_address')),
            argMinIf(intent_masked, cityHash64(intent_masked), has(intent_details, 'phone')),
            argMinIf(intent_masked, cityHash64(intent_masked), has(intent_details, 'id'))
        ] AS kind_examples
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
)
ARRAY JOIN kinds AS detail_kind, kind_calls AS calls_with_kind, kind_examples AS masked_example
WHERE calls_with_kind > 0
ORDER BY version_index, calls_with_kind DESC, detail_kind
