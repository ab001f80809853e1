-- The newest row of every cell of one rollup table, one Kafka partition and the given hours:
-- the consumer's cache of cumulative totals loads its misses with it (package consumers/rollup).
-- {table} is the rollup table, {dims} its dimension columns after hour, {values} the array of its
-- measures (then the array measure's elements); package rollup fills them from its table
-- definitions, never from input.
-- Parameters: kafka_topic, kafka_partition, first hour, last hour, the hours (Array(UInt32), Unix seconds).
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
