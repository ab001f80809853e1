-- Dead letters per hour they were recorded and typed class (ingest.DeadLetterClass; rows from
-- before classes existed show as 'unclassified'): the dashboards keep the most frequent classes
-- and fold the rest into "other". Parameters, in order: from, to (DateTime UTC: the hours
-- starting from..to, both included).
SELECT toStartOfHour(received_at) AS hour, if(reason_class = '', 'unclassified', reason_class) AS reason_class, count() AS dead_letters
FROM mcpulse.dead_letters FINAL
WHERE toStartOfHour(received_at) >= ? AND toStartOfHour(received_at) <= ?
GROUP BY hour, reason_class
ORDER BY hour, reason_class
