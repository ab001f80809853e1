-- Feedback agents left through the MCP analytics SDK's send_feedback virtual tool
-- ($mcp_feedback, mcp_feedback), per feedback type (missing_capability, issue, praise, other)
-- and the tool it is about ('' when none), the most reported first: how many reports, how many
-- said the task was still completed, the negative ones, and the latest report's summary and
-- details. The text is the agent's, already sanitized by the SDK (its redaction markers kept):
-- untrusted, shown escaped. Parameters, in order: from, to (DateTime UTC: reports at from..to,
-- both included), client twice (String, '' = all), limit (UInt64: how many rows).
SELECT
    feedback_type,
    feedback_tool AS about_tool,
    count() AS reports,
    -- ifNull: 18.16 types countIf over a Nullable condition Nullable(UInt64), NULL when every
    -- row is NULL; current releases give UInt64 0.
    countIf(ifNull(task_completed, 0) = 1) AS tasks_completed,
    countIf(sentiment = 'negative') AS negative_reports,
    argMax(summary, (timestamp, uuid)) AS latest_summary,
    argMax(details, (timestamp, uuid)) AS latest_details,
    max(timestamp) AS last_seen
FROM mcpulse.mcp_feedback FINAL
WHERE timestamp >= ? AND timestamp <= ?
    AND kind = 'feedback'
    AND (? = '' OR client_name = ?)
GROUP BY feedback_type, feedback_tool
ORDER BY reports DESC, last_seen DESC, feedback_type, about_tool
LIMIT ?
