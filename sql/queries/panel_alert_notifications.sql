-- Alert notifications per receiver in the range: transitions delivered, failed attempts (a
-- failure is retried at the next evaluation, while the transition is recent), and the last
-- delivery. Parameters, in order: from, to (DateTime UTC: notified from..to, both included).
SELECT
    receiver,
    kind AS receiver_type,
    countIf(status = 'sent') AS delivered,
    sumIf(attempts, status = 'failed') AS failed_attempts,
    maxIf(at, status = 'sent') AS last_delivered
FROM mcpulse.alert_notifications FINAL
WHERE at >= ? AND at <= ?
GROUP BY receiver, kind
ORDER BY receiver
