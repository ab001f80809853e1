-- Every row of the recruitment funnel rollup.
SELECT day, campaign_id, feature_flag, invitations, people, first_opens, accepted, declined, cancelled, unanswered
FROM mcpulse.v_recruitment_funnel_daily
