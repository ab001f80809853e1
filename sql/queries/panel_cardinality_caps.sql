-- Per MCP server with calls in the range: the distinct tool and client names its rollup rows
-- hold (an overflow bucket counts as one) and how many distinct values the consumer's
-- cardinality caps folded into the buckets '(other tools)', '(other clients)' and
-- '(other keys)' (0 when none: the caps hold per Kafka partition, server and hour; DESIGN.md §8),
-- with the calls that had a value folded. Servers with values folded first. A distinct count
-- over several hours is the union's (uniq states merged), an estimate past some ten thousand.
-- Reads v_tool_call_stats_hourly and cardinality_overflow_hourly.
-- Parameters, in order: from, to, from, to (DateTime UTC: the hours starting from..to, both
-- included), limit (UInt64: how many servers).
SELECT
    if(server_name = '', 'unknown', server_name) AS server,
    calls,
    tools_stored,
    clients_stored,
    folded_tools,
    folded_clients,
    folded_key_paths,
    calls_folded
FROM
(
    SELECT
        server_name,
        sum(calls) AS calls,
        uniqExact(tool_name) AS tools_stored,
        uniqExact(client_name) AS clients_stored
    FROM mcpulse.v_tool_call_stats_hourly
    WHERE hour >= ? AND hour <= ?
    GROUP BY server_name
) AS stored
ANY LEFT JOIN
(
    SELECT
        server_name,
        toUInt64(uniqMergeIf(folded_values, dimension = 'tool')) AS folded_tools,
        toUInt64(uniqMergeIf(folded_values, dimension = 'client')) AS folded_clients,
        toUInt64(uniqMergeIf(folded_values, dimension = 'key_path')) AS folded_key_paths,
        toUInt64(uniqMerge(folded_calls)) AS calls_folded
    FROM mcpulse.cardinality_overflow_hourly
    WHERE hour >= ? AND hour <= ?
    GROUP BY server_name
) AS folded USING server_name
ORDER BY folded_tools + folded_clients + folded_key_paths DESC, calls DESC, server
LIMIT ?
