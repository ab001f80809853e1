-- Alert transitions (firing, resolved) in the range, newest first, with the value and summary
-- each one was notified with. Parameters, in order: from, to (DateTime UTC: transitions at
-- from..to, both included), limit (UInt64: how many).
SELECT at, rule, state, labels, value_text, summary, firing_since
FROM mcpulse.alert_transitions FINAL
WHERE at >= ? AND at <= ?
ORDER BY at DESC, rule, labels, seq DESC
LIMIT ?
