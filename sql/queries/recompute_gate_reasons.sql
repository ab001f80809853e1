-- v_gate_reasons_hourly recomputed from the deduplicated raw table, to check the rollup.
SELECT
    toStartOfHour(timestamp) AS hour,
    campaign_id,
    recruitment_reason AS reason,
    client_name,
    url_supported,
    form_supported,
    count() AS calls,
    uniqExact(distinct_id) AS people
FROM mcpulse.tool_calls FINAL
WHERE recruitment_reason != ''
GROUP BY hour, campaign_id, reason, client_name, url_supported, form_supported
