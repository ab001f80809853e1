-- Every ops reset recorded in suppression_audit, for the suppression fold (reconcile takes each
-- identity's last; the contact-policy audit replays them all). at_ms is the reset time in
-- milliseconds since the epoch (whole seconds for rows stored before migration 0006).
-- No parameters.
SELECT
    identity_hash,
    if(at_ms = 0, toInt64(toUInt32(at)) * 1000, at_ms) AS at_ms,
    actor,
    reason
FROM mcpulse.suppression_audit FINAL
WHERE action = 'suppression_reset'
