-- Every invitation sent, for the contact-policy audit: one row per invitation event,
-- deduplicated by uuid. sent_at_ms is the event's timestamp in milliseconds since the epoch
-- (whole seconds for rows stored before migration 0006). No parameters.
SELECT
    identity_hash,
    distinct_id,
    campaign_id,
    invitation_id,
    if(timestamp_ms = 0, toInt64(toUInt32(timestamp)) * 1000, timestamp_ms) AS sent_at_ms
FROM mcpulse.recruitment_events FINAL
WHERE kind = 'invitation_sent'
