-- Every invitation sent, for the contact-policy audit: one row per invitation event,
-- deduplicated by uuid. sent_at_ms is the event's timestamp in milliseconds since the epoch
-- (whole seconds for rows stored before migration 0006). url_supported is the invitation's
-- interview_recruitment_url_supported (NULL: no capability metadata), completed_calls and
-- session_age_seconds the server's warm-up counters before the call (NULL when absent);
-- properties is the JSON text of the properties no column holds (the client, conversation,
-- surface, task and request the audit reads, DESIGN.md §8). No parameters.
SELECT
    identity_hash,
    distinct_id,
    campaign_id,
    invitation_id,
    if(timestamp_ms = 0, toInt64(toUInt32(timestamp)) * 1000, timestamp_ms) AS sent_at_ms,
    feature_flag,
    url_supported,
    completed_calls,
    session_age_seconds,
    properties
FROM mcpulse.recruitment_events FINAL
WHERE kind = 'invitation_sent'
