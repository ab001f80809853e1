-- Per campaign and kind, for the alert rule contact-policy-violation: invitations sent in the
-- window that broke a rule the contact-policy audit checks besides suppression and the 7-day
-- repeat (warm-up thresholds, URL elicitation, surface or task, one evaluation, exclusion
-- cohort; contact_policy_violations), with the 5 smallest of their invitation ids (never the
-- distinct ids: notifications leave the building).
-- Parameters, in order: from, to (DateTime UTC: sent from..to, both included).
SELECT
    campaign_id,
    kind,
    count() AS contact_policy_violations,
    arrayStringConcat(arraySlice(arraySort(groupArray(invitation_id)), 1, 5), ', ') AS example_invitations
FROM mcpulse.contact_policy_violations FINAL
WHERE kind NOT IN ('sent_while_suppressed', 'repeat_within_7_days') AND sent_at >= ? AND sent_at <= ?
GROUP BY campaign_id, kind
ORDER BY campaign_id, kind
