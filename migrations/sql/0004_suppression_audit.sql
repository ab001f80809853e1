-- Ops audit of suppression resets (one row per reset), stored by the consumers from topic
-- mcpulse_audit. audit_id is the audit event's uuid, so a redelivered audit event collapses.
CREATE TABLE IF NOT EXISTS mcpulse.suppression_audit
(
    audit_id String,
    at DateTime('UTC'),
    action String,
    identity_hash String,
    distinct_id String,
    instance_url String,
    actor String,
    reason String,
    deleted_keys Array(String),
    previous_record String,
    kafka_partition Int32,
    kafka_offset Int64
)
ENGINE = ReplacingMergeTree()
PARTITION BY toYYYYMM(at)
ORDER BY (identity_hash, at, audit_id);

-- Contact-policy violations found in the event log by `mcpulse suppression audit`: invitations
-- sent while the identity was suppressed or in cooldown, and repeat invitations within 7 days.
-- One row per (kind, invitation); re-running the audit replaces rows with the same key.
CREATE TABLE IF NOT EXISTS mcpulse.contact_policy_violations
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
PARTITION BY toYYYYMM(sent_at)
ORDER BY (kind, invitation_id);
