-- Each gate reason's share of the tool calls that carried a reason, per campaign ('' = calls
-- outside any campaign).
SELECT campaign_id, reason, calls, calls / sum_calls AS share
FROM
(
    SELECT campaign_id, reason, sum(calls) AS calls
    FROM mcpulse.v_gate_reasons_hourly
    GROUP BY campaign_id, reason
) AS per_reason
ALL INNER JOIN
(
    SELECT campaign_id, sum(calls) AS sum_calls
    FROM mcpulse.v_gate_reasons_hourly
    GROUP BY campaign_id
) AS per_campaign USING campaign_id
ORDER BY campaign_id, calls DESC, reason
