-- The closed hours whose gate-reason people need a seal (a cell without one, or whose calls
-- changed since: migration 0034), oldest first.
-- Parameters: the first hour not closed yet (DateTime, Unix seconds).
SELECT hour
FROM mcpulse.v_gate_reason_unsealed_hours
WHERE hour < toDateTime(?, 'UTC')
ORDER BY hour
