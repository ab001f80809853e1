-- Each gate reason's share of the tool calls that carried a reason, per hour (DESIGN.md §4),
-- with both counts (calls with the reason, hour_calls with any reason):
-- why the MCP servers did or did not invite. Campaign '' in the data is calls outside any
-- campaign. Parameters, in order: from, to (DateTime UTC: the hours starting from..to, both
-- included), campaign twice, client twice (String, '' = all).
SELECT hour, reason, calls, hour_calls, calls / hour_calls AS share
FROM
(
    SELECT hour, groupArray(reason) AS reasons, groupArray(reason_calls) AS calls_per_reason, sum(reason_calls) AS hour_calls
    FROM
    (
        SELECT hour, reason, sum(calls) AS reason_calls
        FROM mcpulse.v_gate_reason_calls_hourly
        WHERE hour >= ? AND hour <= ?
            AND (? = '' OR campaign_id = ?)
            AND (? = '' OR client_name = ?)
        GROUP BY hour, reason
    )
    GROUP BY hour
)
ARRAY JOIN reasons AS reason, calls_per_reason AS calls
ORDER BY hour, reason
