-- The cells of one rollup table, one Kafka partition and the given hours whose newest row is
-- as of an offset beyond the partition's committed offset: written by a batch that was stored but
-- never committed (package consumers/rollup resets them to their `before` totals). {table},
-- {dims} and {values} as in cells.sql.
-- Parameters: kafka_topic, kafka_partition, first hour, last hour, the hours (Array(UInt32), Unix seconds), committed offset.
SELECT
    hour,
    {dims},
    argMax({values}, version) AS totals,
    argMax(as_of, version) AS totals_as_of,
    argMax(before, version) AS before_totals,
    argMax(before_as_of, version) AS before_totals_as_of,
    max(version) AS newest
FROM {table}
WHERE kafka_topic = ? AND kafka_partition = ?
    AND hour >= toDateTime(?, 'UTC') AND hour <= toDateTime(?, 'UTC') AND has(?, toUInt32(hour))
GROUP BY hour, {dims}
HAVING totals_as_of > ?
