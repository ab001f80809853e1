-- Per campaign, for the alert rule invitation-to-suppressed: invitations sent in the window to
-- a person who had accepted, declined or was in a cooldown, as the scheduler's contact-policy
-- audit found them (contact_policy_violations, kind sent_while_suppressed), with up to 5 of
-- their invitation ids (never the distinct ids: notifications leave the building).
-- Parameters, in order: from, to (DateTime UTC: sent from..to, both included).
SELECT
    campaign_id,
    count() AS invitations_to_suppressed,
    arrayStringConcat(arraySort(groupArray(5)(invitation_id)), ', ') AS example_invitations
FROM mcpulse.contact_policy_violations FINAL
WHERE kind = 'sent_while_suppressed' AND sent_at >= ? AND sent_at <= ?
GROUP BY campaign_id
ORDER BY campaign_id
