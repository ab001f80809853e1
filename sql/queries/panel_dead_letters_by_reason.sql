-- Dead letters by reason class, most frequent first. The class is the typed one the pipeline
-- gave each dead letter (ingest.DeadLetterClass, Kafka header mcpulse-error-class, column
-- reason_class: bad_json, invalid_uuid, invalid_timestamp, invalid_properties, clock, ...);
-- rows recorded before classes existed show as 'unclassified'. The reason text is never parsed.
-- example is the one-line reason of the latest dead letter of the class.
-- Parameters, in order: from, to (DateTime UTC: recorded from..to, both included), limit
-- (UInt64: how many classes).
SELECT
    class AS reason_class,
    count() AS dead_letters,
    argMax(reason, (received_at, dead_letter_id)) AS example,
    max(received_at) AS last_seen
FROM
(
    SELECT if(reason_class = '', 'unclassified', reason_class) AS class, reason, received_at, dead_letter_id
    FROM mcpulse.dead_letters FINAL
    WHERE received_at >= ? AND received_at <= ?
)
GROUP BY class
ORDER BY dead_letters DESC, class
LIMIT ?
