-- contact_policy_violations collapses a re-detected violation by (kind, invitation_id)
-- (ReplacingMergeTree(detected_at)), but migration 0004 partitioned it by the month of sent_at,
-- a column outside its sort key: rows are replaced only within one partition, so a violation
-- detected again with another sent_at (the invitation's earliest record changed) stayed twice.
-- Rebuilt without a partition key: violations are few.

CREATE TABLE IF NOT EXISTS mcpulse.contact_policy_violations_keyed
(
    kind String,
    invitation_id String,
    sent_at DateTime('UTC'),
    campaign_id String,
    identity_hash String,
    distinct_id String,
    state_at_send String,
    previous_invitation_id String,
    detected_at DateTime('UTC')
)
ENGINE = ReplacingMergeTree(detected_at)
ORDER BY (kind, invitation_id);

INSERT INTO mcpulse.contact_policy_violations_keyed (kind, invitation_id, sent_at, campaign_id, identity_hash,
    distinct_id, state_at_send, previous_invitation_id, detected_at)
SELECT kind, invitation_id, sent_at, campaign_id, identity_hash, distinct_id, state_at_send,
    previous_invitation_id, detected_at
FROM mcpulse.contact_policy_violations FINAL;

RENAME TABLE mcpulse.contact_policy_violations TO mcpulse.contact_policy_violations_by_month, mcpulse.contact_policy_violations_keyed TO mcpulse.contact_policy_violations;

DROP TABLE IF EXISTS mcpulse.contact_policy_violations_by_month;
