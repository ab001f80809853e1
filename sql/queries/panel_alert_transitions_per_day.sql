-- Alerts that started firing per UTC day and rule, in the range. Parameters, in order: from,
-- to (DateTime UTC: transitions at from..to, both included).
SELECT toDate(at) AS day, rule, count() AS alerts_fired
FROM mcpulse.alert_transitions FINAL
WHERE state = 'firing' AND at >= ? AND at <= ?
GROUP BY day, rule
ORDER BY day, rule
