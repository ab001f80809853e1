-- The recruitment funnel per campaign over all days. People and attempts are distinct over
-- the whole range (merged from the rollup's uniqExact states, not summed per day).
SELECT
    campaign_id,
    uniqExactMerge(invitations) AS attempts,
    uniqExactMerge(people) AS people,
    uniqExactMerge(first_opens) AS first_opens,
    uniqExactMerge(accepted) AS accepted,
    uniqExactMerge(declined) AS declined,
    uniqExactMerge(cancelled) AS cancelled,
    attempts - uniqExactMerge(answered) AS unanswered
FROM mcpulse.recruitment_funnel_daily
GROUP BY campaign_id
ORDER BY campaign_id
