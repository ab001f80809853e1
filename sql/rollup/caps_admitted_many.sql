-- The values the cardinality caps admitted (stored unfolded) in several windows at once, as
-- caps_admitted.sql for one: per Kafka partition, MCP server name and hour, the tool names,
-- client names and counted ignored-key paths of the window's tool calls stored before an offset
-- of its partition, whose row folded none of them. A window is named 'partition/hour/server'
-- (hour in Unix seconds; the server last, so no name can be read as another window's).
-- Parameters: overflow key-path bucket, first hour, end of the last hour (Unix seconds), the
-- partitions (Array(Int32)), the windows (Array(String)), each partition's offset
-- (Array(Int64), in the order of the partitions), the partitions again.
SELECT
    kafka_partition,
    server_name,
    toUInt32(toStartOfHour(timestamp)) AS hour,
    groupUniqArrayIf(tool_name, folded_tool_name = '') AS tools,
    groupUniqArrayIf(client_name, folded_client_name = '') AS clients,
    groupUniqArrayArray(if(empty(folded_key_paths), counted_ignored_keys, arrayFilter(k -> k != ?, counted_ignored_keys))) AS key_paths
FROM mcpulse.tool_calls
WHERE timestamp >= toDateTime(?, 'UTC') AND timestamp < toDateTime(?, 'UTC')
    AND has(?, kafka_partition)
    AND has(?, concat(toString(kafka_partition), '/', toString(toUInt32(toStartOfHour(timestamp))), '/', server_name))
    AND kafka_offset < arrayElement(?, indexOf(?, kafka_partition))
GROUP BY kafka_partition, server_name, hour
