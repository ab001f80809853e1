-- Suppression resets recorded in suppression_audit (ops `mcpulse suppression reset`), newest
-- first: who reset whom, why, and the state the identity was in before. Parameters, in order:
-- from, to (DateTime UTC: resets at from..to, both included), limit (UInt64: how many).
SELECT
    at,
    distinct_id,
    identity_hash,
    actor,
    reason,
    multiIf(
        previous_record = '', 'none',
        visitParamExtractString(previous_record, 'response') = 'booking_link_accepted', 'accepted',
        visitParamExtractString(previous_record, 'response') = 'do_not_ask_again', 'declined',
        visitParamExtractString(previous_record, 'response') = 'cooldown', 'cooldown',
        'unreadable') AS previous_state,
    length(deleted_keys) AS deleted_keys_count
FROM mcpulse.suppression_audit FINAL
WHERE action = 'suppression_reset' AND at >= ? AND at <= ?
ORDER BY at DESC, audit_id
LIMIT ?
