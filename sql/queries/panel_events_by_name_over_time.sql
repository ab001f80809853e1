-- Events per name and hour as the consumers received them (every kind, and names mcpulse does
-- not route, stored as other events), from v_events_by_name_hourly: the dashboards keep the
-- most frequent names and fold the rest into "other". Parameters, in order: from, to (DateTime
-- UTC: the hours starting from..to, both included).
SELECT hour, event, sum(events) AS events
FROM mcpulse.v_events_by_name_hourly
WHERE hour >= ? AND hour <= ?
GROUP BY hour, event
ORDER BY hour, event
