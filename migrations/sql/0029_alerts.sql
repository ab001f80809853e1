-- Alert state (dashboards/alerts, evaluated by the scheduler). Each alert instance (a rule and
-- the values of its label columns) is a chain of transitions: firing, resolved, firing, ...
-- numbered by seq. A transition's id is deterministic: a hash of the rule, the instance, seq,
-- the state and the previous transition's id, so two scheduler replicas that see the same
-- change compute the same id, and their two inserts collapse into one row. Few rows (one per
-- change of an alert), so no partition key: a ReplacingMergeTree collapses only within a
-- partition, and a partition key outside the sort key would keep duplicates apart.

-- instance is the canonical JSON of the instance's label values ('{}' for a rule without
-- labels), labels the same as text for people ("tool_name: search"); value_text is the value
-- as the rule's column is shown ("3.2%"); firing_since is when the episode began (the at of
-- its firing transition).
CREATE TABLE IF NOT EXISTS mcpulse.alert_transitions
(
    transition_id String,
    rule String,
    instance String,
    seq UInt32,
    state String,
    previous_id String,
    labels String,
    value Nullable(Float64),
    value_text String,
    volume Nullable(Float64),
    summary String,
    at DateTime('UTC'),
    firing_since DateTime('UTC'),
    recorded_by String
)
ENGINE = ReplacingMergeTree()
ORDER BY (rule, instance, seq, transition_id);

-- The newest transition of every instance (the tip of its chain), kept by seq: what the
-- evaluator compares the current figures with, and what "firing now" shows. Bounded by the
-- number of instances, whatever the history.
CREATE TABLE IF NOT EXISTS mcpulse.alert_state
(
    rule String,
    instance String,
    seq UInt32,
    transition_id String,
    state String,
    labels String,
    value Nullable(Float64),
    value_text String,
    summary String,
    at DateTime('UTC'),
    firing_since DateTime('UTC')
)
ENGINE = ReplacingMergeTree(seq)
ORDER BY (rule, instance);

CREATE MATERIALIZED VIEW IF NOT EXISTS mcpulse.alert_state_mv
TO mcpulse.alert_state
AS SELECT rule, instance, seq, transition_id, state, labels, value, value_text, summary, at, firing_since
FROM mcpulse.alert_transitions;

-- One row per delivery attempt outcome of a transition to one receiver: status 'sent' once it
-- was delivered (the evaluator checks for it before sending, so a lost Redis claim cannot send
-- twice), 'failed' with the error while it was not (retried at the next evaluation).
CREATE TABLE IF NOT EXISTS mcpulse.alert_notifications
(
    transition_id String,
    receiver String,
    status String,
    rule String,
    instance String,
    state String,
    kind String,
    attempts UInt32,
    error String,
    at DateTime('UTC'),
    sent_by String
)
ENGINE = ReplacingMergeTree(at)
ORDER BY (transition_id, receiver, status);
