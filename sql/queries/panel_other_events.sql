-- Events whose name mcpulse does not route, per name, the most frequent first: they are stored
-- in other_events (never dropped) and forwarded, and a client sending something new shows
-- here. Reads the raw table other_events: it holds only these events. Names are caller-chosen
-- text. Parameters, in order: from, to (DateTime UTC: events at from..to, both included),
-- limit (UInt64: how many names).
SELECT event, count() AS events, min(timestamp) AS first_seen, max(timestamp) AS last_seen
FROM mcpulse.other_events FINAL
WHERE timestamp >= ? AND timestamp <= ?
GROUP BY event
ORDER BY events DESC, event
LIMIT ?
