-- Seals the gate-reason people of the given hours: each cell's calls and distinct people,
-- recomputed from the deduplicated raw table and stamped with the seal's time (migration 0034).
-- Parameters: sealed_at (DateTime, Unix seconds), first hour, last hour (DateTime, Unix
-- seconds), the hours (Array(UInt32), Unix seconds).
INSERT INTO mcpulse.gate_reason_people_sealed (hour, campaign_id, reason, client_name, url_support, form_support,
    calls, people, sealed_at)
SELECT toStartOfHour(timestamp) AS hour, campaign_id, recruitment_reason, client_name,
    ifNull(url_supported, 2) AS url_support, ifNull(form_supported, 2) AS form_support,
    count(), uniqExact(distinct_id), toDateTime(?, 'UTC')
FROM mcpulse.tool_calls FINAL
WHERE recruitment_reason != ''
    AND timestamp >= toDateTime(?, 'UTC') AND timestamp < toDateTime(?, 'UTC') + 3600
    AND has(?, toUInt32(toStartOfHour(timestamp)))
GROUP BY hour, campaign_id, recruitment_reason, client_name, url_support, form_support
