-- The recruitment funnel per campaign: invitations sent, first opens of the booking link, the
-- invitations answered within 10 minutes, and how they ended (accept, decline, cancel, or no
-- answer within 10 minutes), counted once per invitation. The funnel is a cohort by the invitation's UTC send day (DESIGN.md §8): a day is
-- included when it starts in the range. Parameters, in order: from, to (DateTime UTC: the days
-- starting from..to, both included), campaign twice (String, '' = all).
SELECT
    campaign_id,
    uniqExactMerge(invitations) AS sent,
    uniqExactMerge(first_opens) AS first_opens,
    uniqExactMerge(answered) AS answered,
    uniqExactMerge(accepted) AS accepted,
    uniqExactMerge(declined) AS declined,
    uniqExactMerge(cancelled) AS cancelled,
    toInt64(sent) - toInt64(answered) AS unanswered
FROM mcpulse.recruitment_funnel_daily
WHERE toDateTime(day, 'UTC') >= ? AND toDateTime(day, 'UTC') <= ?
    AND (? = '' OR campaign_id = ?)
GROUP BY campaign_id
ORDER BY campaign_id
