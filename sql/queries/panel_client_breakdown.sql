-- Recruitment by MCP client: tool calls that carried a gate reason, the calls that ended in an
-- invitation (reason 'invited') and their share, and the calls the most frequent skip reason
-- stopped. A call without a client name is shown as 'unknown'. (Distinct people per client
-- are not shown: merging every person's distinct_id over the range takes over a second at a
-- million events; the reach panel counts people per campaign.) Parameters, in order: from,
-- to (DateTime UTC: the hours starting from..to, both included), campaign twice, client twice
-- (String, '' = all).
SELECT
    if(client_name = '', 'unknown', client_name) AS client,
    sum(reason_calls) AS diagnosed_calls,
    sumIf(reason_calls, reason = 'invited') AS invited_calls,
    invited_calls / diagnosed_calls AS invited_share,
    argMaxIf(reason, (reason_calls, reason), reason NOT IN ('invited', 'eligible', 'continuation')) AS top_skip_reason
FROM
(
    -- Plain counts per cell (v_gate_reason_calls_hourly: sealed, or summed over partitions).
    SELECT client_name, reason, sum(calls) AS reason_calls
    FROM mcpulse.v_gate_reason_calls_hourly
    WHERE hour >= ? AND hour <= ?
        AND (? = '' OR campaign_id = ?)
        AND (? = '' OR client_name = ?)
    GROUP BY client_name, reason
)
GROUP BY client
ORDER BY diagnosed_calls DESC, client
