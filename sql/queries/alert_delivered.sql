-- Which receivers a transition was delivered to (status 'sent' in alert_notifications): the
-- alert evaluator checks it after claiming a delivery, so a lost Redis claim cannot send a
-- notification twice. Parameters, in order: transition_id (String).
SELECT receiver
FROM mcpulse.alert_notifications FINAL
WHERE transition_id = ? AND status = 'sent'
ORDER BY receiver
