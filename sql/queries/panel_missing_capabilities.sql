-- What agents say is missing: the capabilities agents reported through the MCP analytics SDK's
-- virtual tools, grouped by their text (case and surrounding blanks ignored), per virtual tool
-- and client, the most reported first. Two sources (mcp_feedback): a get_more_tools call
-- ($mcp_missing_capability, the text is what the agent wrote in its `context` argument) and a
-- send_feedback call of type missing_capability (the text is its summary). The text is the
-- agent's, already sanitized by the SDK (its redaction markers kept): untrusted, shown escaped.
-- Parameters, in order: from, to (DateTime UTC: reports at from..to, both included), client
-- twice (String, '' = all), limit (UInt64: how many rows).
SELECT
    argMax(text, (timestamp, uuid)) AS missing,
    tool_name AS reported_via,
    client_name AS client,
    count() AS reports,
    uniqExact(session_id) AS sessions,
    max(timestamp) AS last_seen
FROM
(
    SELECT uuid, timestamp, tool_name, client_name, session_id,
        if(kind = 'missing_capability', intent, summary) AS text
    FROM mcpulse.mcp_feedback FINAL
    WHERE timestamp >= ? AND timestamp <= ?
        AND (kind = 'missing_capability' OR feedback_type = 'missing_capability')
        AND (? = '' OR client_name = ?)
)
GROUP BY lowerUTF8(replaceRegexpAll(text, '^\\s+|\\s+$', '')), tool_name, client_name
ORDER BY reports DESC, last_seen DESC, missing, reported_via, client
LIMIT ?
