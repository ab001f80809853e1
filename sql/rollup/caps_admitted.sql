-- The values the cardinality caps admitted (stored unfolded) in one Kafka partition, MCP server
-- name and hour, before an offset: the tool names, client names and counted ignored-key paths of
-- the partition's tool calls stored before that offset whose row folded none of them (package
-- consumers/cardinality reads them to rebuild a window it does not hold).
-- Parameters: overflow key-path bucket, kafka_partition, server_name, hour start, hour end (Unix seconds), offset.
SELECT
    groupUniqArrayIf(tool_name, folded_tool_name = '') AS tools,
    groupUniqArrayIf(client_name, folded_client_name = '') AS clients,
    groupUniqArrayArray(if(empty(folded_key_paths), counted_ignored_keys, arrayFilter(k -> k != ?, counted_ignored_keys))) AS key_paths
FROM mcpulse.tool_calls
WHERE kafka_partition = ? AND server_name = ?
    AND timestamp >= toDateTime(?, 'UTC') AND timestamp < toDateTime(?, 'UTC') AND kafka_offset < ?
