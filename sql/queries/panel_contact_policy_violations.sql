-- Contact-policy violations per campaign and kind, as the contact-policy audit stored them
-- (contact_policy_violations: `mcpulse suppression audit`, the scheduler's contact audit):
-- invitations sent in the range that broke each rule, with the 5 smallest of their invitation
-- ids (never distinct ids) and the latest detail (escaped by the audit). Parameters, in order:
-- from, to (DateTime UTC: sent from..to, both included), campaign twice (String, '' = all).
SELECT
    campaign_id,
    kind,
    count() AS contact_policy_violations,
    arrayStringConcat(arraySlice(arraySort(groupArray(invitation_id)), 1, 5), ', ') AS example_invitations,
    argMax(detail, (sent_at, invitation_id)) AS latest_detail
FROM mcpulse.contact_policy_violations FINAL
WHERE sent_at >= ? AND sent_at <= ? AND (? = '' OR campaign_id = ?)
GROUP BY campaign_id, kind
ORDER BY campaign_id, kind
