-- panel_gate_reason_shares_over_time computed from the deduplicated raw table tool_calls. Same
-- parameters.
SELECT hour, reason, calls, hour_calls, calls / hour_calls AS share
FROM
(
    SELECT hour, groupArray(reason) AS reasons, groupArray(reason_calls) AS calls_per_reason, sum(reason_calls) AS hour_calls
    FROM
    (
        SELECT toStartOfHour(timestamp) AS hour, recruitment_reason AS reason, count() AS reason_calls
        FROM mcpulse.tool_calls FINAL
        WHERE recruitment_reason != ''
            AND toStartOfHour(timestamp) >= ? AND toStartOfHour(timestamp) <= ?
            AND (? = '' OR campaign_id = ?)
            AND (? = '' OR client_name = ?)
        GROUP BY hour, reason
    )
    GROUP BY hour
)
ARRAY JOIN reasons AS reason, calls_per_reason AS calls
ORDER BY hour, reason
