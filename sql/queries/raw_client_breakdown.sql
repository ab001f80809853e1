-- panel_client_breakdown computed from the deduplicated raw table tool_calls. Same parameters.
SELECT
    if(client_name = '', 'unknown', client_name) AS client,
    sum(reason_calls) AS diagnosed_calls,
    sumIf(reason_calls, reason = 'invited') AS invited_calls,
    invited_calls / diagnosed_calls AS invited_share,
    argMaxIf(reason, (reason_calls, reason), reason NOT IN ('invited', 'eligible', 'continuation')) AS top_skip_reason
FROM
(
    SELECT client_name, recruitment_reason AS reason, count() AS reason_calls
    FROM mcpulse.tool_calls FINAL
    WHERE recruitment_reason != ''
        AND toStartOfHour(timestamp) >= ? AND toStartOfHour(timestamp) <= ?
        AND (? = '' OR campaign_id = ?)
        AND (? = '' OR client_name = ?)
    GROUP BY client_name, reason
)
GROUP BY client
ORDER BY diagnosed_calls DESC, client
