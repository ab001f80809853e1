-- The cells one batch wrote in one partition and the totals it replaced in each (migration
-- 0035): a member resets them when the batch was stored but never committed, or continues
-- from them when it finds a late row of that batch.
-- Parameters: kafka_topic, kafka_partition, the batch's version.
SELECT cell_tables, cell_keys, befores, before_as_ofs
FROM mcpulse.rollup_batches
WHERE kafka_topic = ? AND kafka_partition = ? AND version = ?
LIMIT 1
