-- The dead-letter rate of a window, for the alert rule dead-letter-rate: dead letters recorded
-- in the window ÷ (events stored in it + those dead letters), both by the consumer's clock
-- (received_at, inserted_at), and the most frequent dead-letter class. Rows are counted as
-- stored, so an event a replay stored twice counts twice until ClickHouse merges it: a rate
-- for an alert, not an exact figure. Parameters, in order: from, to (DateTime UTC: recorded
-- from..to, both included), three times (dead letters, tool calls, recruitment events).
-- (assumeNotNull: current ClickHouse types a scalar subquery as Nullable, 18.16 does not.)
SELECT
    assumeNotNull(tupleElement(dl, 1)) AS dead_letters,
    assumeNotNull(stored) + dead_letters AS events,
    if(events = 0, 0., dead_letters / events) AS dead_letter_rate,
    assumeNotNull(tupleElement(dl, 2)) AS top_reason_class
FROM
(
    SELECT
        (
            SELECT (count(), if(count() = 0, '', arrayElement(topK(1)(if(reason_class = '', 'unclassified', reason_class)), 1)))
            FROM mcpulse.dead_letters FINAL
            WHERE received_at >= ? AND received_at <= ?
        ) AS dl,
        (SELECT count() FROM mcpulse.tool_calls WHERE inserted_at >= ? AND inserted_at <= ?)
            + (SELECT count() FROM mcpulse.recruitment_events WHERE inserted_at >= ? AND inserted_at <= ?) AS stored
)
