-- Resource reads per uri ($mcp_resource_read, mcp_resource_prompt_events), the most failing
-- first: reads, failed reads, their error rate (failed ÷ reads), p95 duration and the latest
-- failure's message. A uri is the client's text: untrusted, shown escaped. Parameters, in order:
-- from, to (DateTime UTC: reads at from..to, both included), client twice (String, '' = all),
-- limit (UInt64: how many rows).
SELECT
    name AS uri,
    count() AS reads,
    sum(is_error) AS failed_reads,
    failed_reads / reads AS error_rate,
    quantileExact(0.95)(duration_ms) AS p95_ms,
    argMaxIf(error_message, (timestamp, uuid), is_error = 1) AS latest_error,
    max(timestamp) AS last_seen
FROM mcpulse.mcp_resource_prompt_events FINAL
WHERE timestamp >= ? AND timestamp <= ?
    AND kind = 'resource_read'
    AND (? = '' OR client_name = ?)
GROUP BY name
ORDER BY error_rate DESC, reads DESC, uri
LIMIT ?
