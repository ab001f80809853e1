-- The newest transition of every alert instance (the tip of its chain; migration 0029): what
-- the alert evaluator (dashboards/alerts) compares the current figures with. No parameters.
SELECT rule, instance, seq, transition_id, state, labels, value, value_text, summary, at, firing_since
FROM mcpulse.alert_state FINAL
ORDER BY rule, instance
