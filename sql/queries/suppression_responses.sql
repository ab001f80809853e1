-- Every invitation response, for the suppression fold (`mcpulse suppression reconcile`, the
-- contact-policy audit): one row per response event, deduplicated by uuid. responded_at_ms is
-- milliseconds since the epoch, as the Redis script compares them; rows stored before
-- migration 0006 hold 0 / NULL in the millisecond columns and fall back to whole seconds.
-- No parameters.
SELECT
    identity_hash,
    distinct_id,
    campaign_id,
    response,
    ifNull(responded_at_ms, ifNull(toInt64(toUInt32(responded_at)) * 1000,
        if(timestamp_ms = 0, toInt64(toUInt32(timestamp)) * 1000, timestamp_ms))) AS responded_at_ms
FROM mcpulse.recruitment_events FINAL
WHERE kind = 'response'
