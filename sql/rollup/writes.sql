-- The newest rollup write marker of every partition of the given topics, written by the release
-- before migration 0035 (rollup_writes, renamed by migration 0036): the end offset of the last
-- batch whose rollup rows a member of that release began to write, and the hours they fall in.
-- Parameters: the topics (Array(String)).
SELECT kafka_topic, kafka_partition, argMax(as_of, version) AS marker_as_of, argMax(hours, version) AS marker_hours
FROM mcpulse.rollup_writes_before_0035
WHERE has(?, kafka_topic)
GROUP BY kafka_topic, kafka_partition
