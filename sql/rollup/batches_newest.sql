-- The newest batch marker of every partition of the given topics (migration 0035): the end
-- offset of the last batch whose rollup rows a member began to write, and its version.
-- Parameters: the topics (Array(String)).
SELECT kafka_topic, kafka_partition, argMax(as_of, version) AS marker_as_of, max(version) AS marker_version
FROM mcpulse.rollup_batches
WHERE has(?, kafka_topic)
GROUP BY kafka_topic, kafka_partition
