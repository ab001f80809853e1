-- The totals a batch's rollup rows replace live with the batch's write marker, not in every
-- row (docs/pipeline.md, "Rollups as cumulative totals"). Migration 0015 kept them in each
-- row's `before` and before_as_of: after merges every cell's newest row still carried its
-- previous totals, about a third of the rollups' bytes, read only when a member takes over a
-- partition whose newest batch was stored but never committed.
--
-- A batch's marker per partition is now one row of this table, written before the batch's
-- rollup rows: its end offset (as_of), the hours its rows fall in, and for every cell it
-- writes the table (cell_tables), the cell's dimensions (cell_keys: the consumer's own
-- encoding, package consumers/rollup), the totals the batch replaces (befores: measures in
-- column order, then the array measure's elements) and the offset they are as of
-- (before_as_ofs). version is the version of the batch's rows in that partition.
--
-- Row versions change with it: bit 63 set, then 23 bits of epoch, then 40 bits of the offset
-- the row's totals are as of, which the row's as_of column no longer repeats (it is left 0).
-- Versions of rows written before this migration (epoch << 32 | sequence) lack bit 63, so
-- every later row supersedes them, and their as_of still holds their offset. Consumers of
-- both forms must not share a consumer group (docs/pipeline.md, "Upgrading across migration
-- 0035"): stop the old release before the new one starts. As measured on
-- the benchmark's 10M events over 24 hours, the previous totals and the two per-row offsets
-- made 57% of the rollups' bytes after merges.
--
-- ReplacingMergeTree(version) over (partition, epoch) keeps each generation's newest batch
-- per partition: the one batch a member of that generation may have stored but not committed,
-- and whose late rows a new owner may find. So the table holds one row per partition per
-- generation, each at most one batch's cells; members drop the blocks of epochs more than
-- 1,024 generations old (PARTITION BY intDiv(epoch, 1024)), so it does not grow with the
-- events nor without bound with the rebalances. rollup_writes (0015) is read for markers
-- written before this migration and no longer written.

CREATE TABLE IF NOT EXISTS mcpulse.rollup_batches
(
    kafka_topic String,
    kafka_partition Int32,
    epoch UInt64,
    as_of Int64,
    hours Array(DateTime('UTC')),
    cell_tables Array(String),
    cell_keys Array(String),
    befores Array(Array(UInt64)),
    before_as_ofs Array(Int64),
    version UInt64
)
ENGINE = ReplacingMergeTree(version)
PARTITION BY intDiv(epoch, 1024)
ORDER BY (kafka_topic, kafka_partition, epoch);
