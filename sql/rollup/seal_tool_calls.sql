-- The deduplicated raw tool calls of each of the given hours, counted before the seal
-- recomputes the hours' cells (migration 0037).
-- Parameters: first hour, last hour (DateTime, Unix seconds), the hours (Array(UInt32), Unix
-- seconds).
SELECT toStartOfHour(timestamp) AS hour, count() AS tool_calls
FROM mcpulse.tool_calls FINAL
WHERE timestamp >= toDateTime(?, 'UTC') AND timestamp < toDateTime(?, 'UTC') + 3600
    AND has(?, toUInt32(toStartOfHour(timestamp)))
GROUP BY hour
