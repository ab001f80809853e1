-- People reached and attempts per campaign: people are distinct distinct_ids invited, attempts
-- distinct invitation_ids (PostHog's guidance), both distinct over the whole range (merged
-- from the rollup's states, not summed per day), by the invitation's UTC send day.
-- Parameters, in order: from, to (DateTime UTC: the days starting from..to, both included),
-- campaign twice (String, '' = all).
SELECT
    campaign_id,
    uniqExactMerge(people) AS people,
    uniqExactMerge(invitations) AS attempts,
    if(people = 0, 0., attempts / people) AS attempts_per_person
FROM mcpulse.recruitment_funnel_daily
WHERE toDateTime(day, 'UTC') >= ? AND toDateTime(day, 'UTC') <= ?
    AND (? = '' OR campaign_id = ?)
GROUP BY campaign_id
ORDER BY campaign_id
