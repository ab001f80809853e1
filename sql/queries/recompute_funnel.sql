-- v_recruitment_funnel_daily recomputed from the deduplicated raw table, to check the rollup.
-- Opens and responses are joined to their invitation here (not read from invitation_sent_at),
-- so the check also covers the consumer's attribution.
SELECT
    toDate(if(has_invitation, sent_at, timestamp)) AS day,
    campaign_id,
    feature_flag,
    uniqExactIf(invitation_id, kind = 'invitation_sent') AS invitations,
    uniqExactIf(distinct_id, kind = 'invitation_sent') AS people,
    uniqExactIf(invitation_id, kind = 'link_opened') AS first_opens,
    uniqExactIf(invitation_id, kind = 'response' AND response = 'accept') AS accepted,
    uniqExactIf(invitation_id, kind = 'response' AND response = 'decline') AS declined,
    uniqExactIf(invitation_id, kind = 'response' AND response = 'cancel') AS cancelled,
    toInt64(invitations) - toInt64(uniqExactIf(invitation_id, kind = 'response' AND has_invitation
        AND ifNull(responded_at, timestamp) <= sent_at + 600)) AS unanswered
FROM
(
    SELECT kind, timestamp, campaign_id, feature_flag, invitation_id, distinct_id, response, responded_at
    FROM mcpulse.recruitment_events FINAL
) AS events
ANY LEFT JOIN
(
    SELECT invitation_id, min(timestamp) AS sent_at, 1 AS has_invitation
    FROM mcpulse.recruitment_events FINAL
    WHERE kind = 'invitation_sent'
    GROUP BY invitation_id
) AS invitations USING invitation_id
GROUP BY day, campaign_id, feature_flag
