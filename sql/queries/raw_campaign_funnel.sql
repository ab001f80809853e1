-- panel_campaign_funnel computed from the deduplicated raw table recruitment_events: opens and
-- responses are joined to their invitation here (not read from invitation_sent_at). Same
-- parameters.
SELECT
    campaign_id,
    uniqExactIf(invitation_id, kind = 'invitation_sent') AS sent,
    uniqExactIf(invitation_id, kind = 'link_opened') AS first_opens,
    uniqExactIf(invitation_id, kind = 'response' AND has_invitation
        AND ifNull(responded_at, timestamp) <= sent_at + 600) AS answered,
    uniqExactIf(invitation_id, kind = 'response' AND response = 'accept') AS accepted,
    uniqExactIf(invitation_id, kind = 'response' AND response = 'decline') AS declined,
    uniqExactIf(invitation_id, kind = 'response' AND response = 'cancel') AS cancelled,
    toInt64(sent) - toInt64(answered) AS unanswered
FROM
(
    SELECT kind, timestamp, campaign_id, invitation_id, response, responded_at
    FROM mcpulse.recruitment_events FINAL
) AS events
ANY LEFT JOIN
(
    SELECT invitation_id, min(timestamp) AS sent_at, 1 AS has_invitation
    FROM mcpulse.recruitment_events FINAL
    WHERE kind = 'invitation_sent'
    GROUP BY invitation_id
) AS invitations USING invitation_id
WHERE toDateTime(toDate(if(has_invitation, sent_at, timestamp)), 'UTC') >= ?
    AND toDateTime(toDate(if(has_invitation, sent_at, timestamp)), 'UTC') <= ?
    AND (? = '' OR campaign_id = ?)
GROUP BY campaign_id
ORDER BY campaign_id
