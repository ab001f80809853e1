-- panel_campaign_reach computed from the deduplicated raw table recruitment_events. Same
-- parameters.
SELECT
    campaign_id,
    uniqExact(distinct_id) AS people,
    uniqExact(invitation_id) AS attempts,
    if(people = 0, 0., attempts / people) AS attempts_per_person
FROM mcpulse.recruitment_events FINAL
WHERE kind = 'invitation_sent'
    AND toDateTime(toDate(timestamp), 'UTC') >= ? AND toDateTime(toDate(timestamp), 'UTC') <= ?
    AND (? = '' OR campaign_id = ?)
GROUP BY campaign_id
ORDER BY campaign_id
